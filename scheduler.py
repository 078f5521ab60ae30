"""The worker process: `python scheduler.py` (MONGODB_URI must name the desk's database).

`desk run` starts it beside the web app; in production run one or more next to the web service.
The jobs live in desk/worker.py.
"""

from desk.worker import main

if __name__ == "__main__":
    main()
