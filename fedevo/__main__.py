"""`python -m fedevo ...`: the same command line as `fedevo ...`."""

from .cli import main

if __name__ == "__main__":
    main()
