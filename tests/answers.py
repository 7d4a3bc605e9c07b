"""Honest answers in a style of their own (vectorised: scatter_, index_add_), shared by the
grading corpus (tests/corpus.py) and the autograd cases (tests/autograd_cases.py)."""

VECTORISED_EX1 = """
dlogprobs = torch.zeros_like(logprobs)
dlogprobs[range(n), Yb] = -1.0/n
dprobs = dlogprobs / probs
dcounts_sum_inv = (counts * dprobs).sum(1, keepdim=True)
dcounts_sum = -counts_sum**-2 * dcounts_sum_inv
dcounts = counts_sum_inv * dprobs + dcounts_sum  # both branches at once, by broadcasting
dnorm_logits = counts * dcounts
dlogit_maxes = -dnorm_logits.sum(1, keepdim=True)
route = torch.zeros_like(logits).scatter_(1, logits.argmax(1, keepdim=True), 1.0)
dlogits = dnorm_logits + route * dlogit_maxes
dh = dlogits @ W2.T
dW2 = h.T @ dlogits
db2 = dlogits.sum(0)
dhpreact = (1 - h**2) * dh
dbngain = (bnraw * dhpreact).sum(0, keepdim=True)
dbnbias = dhpreact.sum(0, keepdim=True)
dbnraw = bngain * dhpreact
dbnvar_inv = (bndiff * dbnraw).sum(0, keepdim=True)
dbnvar = -0.5 * (bnvar + 1e-5)**-1.5 * dbnvar_inv
dbndiff2 = torch.ones_like(bndiff2) * dbnvar / (batch_size - 1)
dbndiff = bnvar_inv * dbnraw + 2 * bndiff * dbndiff2
dbnmeani = -dbndiff.sum(0, keepdim=True)
dhprebn = dbndiff + dbnmeani / batch_size
dembcat = dhprebn @ W1.T
dW1 = embcat.T @ dhprebn
db1 = dhprebn.sum(0)
demb = dembcat.view(-1, block_size, n_embd)
dC = torch.zeros_like(C).index_add_(0, Xb.flatten(), demb.view(-1, n_embd))
"""

VECTORISED_EX4 = """
dlogits = F.softmax(logits, 1)
dlogits[range(n), Yb] -= 1
dlogits /= n
dh = dlogits @ W2.T
dW2 = h.T @ dlogits
db2 = dlogits.sum(0)
dhpreact = (1.0 - h**2) * dh
dbngain = (bnraw * dhpreact).sum(0, keepdim=True)
dbnbias = dhpreact.sum(0, keepdim=True)
dhprebn = bngain*bnvar_inv/n * (n*dhpreact - dhpreact.sum(0) - n/(n-1)*bnraw*(dhpreact*bnraw).sum(0))
dembcat = dhprebn @ W1.T
dW1 = embcat.T @ dhprebn
db1 = dhprebn.sum(0)
dC = torch.zeros_like(C).index_add_(0, Xb.view(-1), dembcat.view(-1, C.shape[1]))
"""
