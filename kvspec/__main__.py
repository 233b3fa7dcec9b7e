"""``python -m kvspec``: the same command line as the ``kvspec`` script."""
from kvspec.cli import entry

if __name__ == "__main__":
    entry()
