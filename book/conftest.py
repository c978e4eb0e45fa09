"""pytest --nbval on the chapters: the notebooks' kernels inherit this environment (--nbval-current-env).

``DFL_BOOK_STATIC=1`` makes ``dfl_book.explore`` show its static figures only, as
when the notebooks were executed by ``tools/book.py execute``; without it a
live kernel would add ipywidgets sliders, whose outputs are not in the
committed notebooks.
"""
import os

os.environ["DFL_BOOK_STATIC"] = "1"
