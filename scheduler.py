"""`python scheduler.py` is `desk worker` (desk/tasks.py holds its table); kept for the scripts that start it so."""

from desk.cli import main

if __name__ == "__main__":
    main(["worker"])
