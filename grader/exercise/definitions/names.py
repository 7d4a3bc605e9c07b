"""The lecture's data cell, shared by every exercise on makemore's names.txt: it reads the file
from beside the notebook, else downloads it and checks its sha256 (grader/exercise/data.py holds
the same URL and digest for the kit's own download), else says in one paragraph what to do.
Backprop Ninja's notebook holds these texts as they are (a test checks)."""

READ_NAMES_TEXT = """\
## The data

`names.txt` holds 32,033 names, one a line. The next cell reads it from beside this notebook. If it
is not there (a fresh Colab or a clone of the course), the cell downloads it from the makemore
repository and checks that it is the lecture's file. Offline, download
https://raw.githubusercontent.com/karpathy/makemore/master/names.txt yourself, put it in the
folder this notebook runs in, and run the cell again."""

READ_NAMES = """\
# read in all the words: names.txt beside this notebook, else fetched from the makemore repository
import hashlib, urllib.request
NAMES_URL = os.environ.get('NAMES_TXT_URL', 'https://raw.githubusercontent.com/karpathy/makemore/master/names.txt')
NAMES_SHA256 = '0a30b5557f192f32ab962680889aac5f6fda0f4cecf40a6d0b5694f58ea8cc4d'
if not os.path.exists('names.txt'):
  try:
    fetched = urllib.request.urlopen(NAMES_URL, timeout=60).read()
  except OSError as e:
    raise FileNotFoundError(f"names.txt is not in {os.getcwd()} and could not be downloaded ({e}). "
                            f"Download {NAMES_URL}, put it in that folder, and run this cell again.") from None
  if hashlib.sha256(fetched).hexdigest() != NAMES_SHA256:
    raise ValueError(f"what {NAMES_URL} sent is not the lecture's names.txt (its sha256 differs): nothing was saved")
  open('names.txt', 'wb').write(fetched)
words = open('names.txt', 'r').read().splitlines()
print(len(words))
print(max(len(w) for w in words))
print(words[:8])"""
