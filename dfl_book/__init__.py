"""The book's presentation layer, above the engine (:mod:`dfl_core`) and the theory (:mod:`theory`).

* :mod:`dfl_book.plots` and :mod:`dfl_book.diagrams`: the book's figures and the pictures drawn in code;
* :mod:`dfl_book.presets`: the papers' experimental protocols (``python -m dfl_core run --preset``);
* :mod:`dfl_book.tables`: the papers' tables rerun (``python -m dfl_core table``);
* :mod:`dfl_book.stats`: paired comparisons over seeds and their verdicts;
* :mod:`dfl_book.workers`: the worker processes of ``--jobs``;
* :mod:`dfl_book.showcase`: each chapter's experiments at the showcase scale, their committed results and
  the verdicts judged from them (``python -m dfl_core showcase``);
* :mod:`dfl_book.profiles`: the sizes the chapters run at (``fast``, ``showcase``, ``full``);
* :mod:`dfl_book.explore`: figures that gain sliders in a live kernel;
* :mod:`dfl_book.notation`: the book's table of symbols, checked against the engine's config;
* :mod:`dfl_book.cli`: the commands above, ``run``'s presets, figure and verdicts, which the engine's CLI
  finds by entry point.

The layers import downwards only: ``dfl_core`` ← ``theory`` ← ``dfl_book`` (``tests/test_architecture.py``).
"""
