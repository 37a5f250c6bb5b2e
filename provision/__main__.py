"""`python -m provision`: the same command line as the `provision` script."""

from provision.cli import main

if __name__ == "__main__":
    main()
