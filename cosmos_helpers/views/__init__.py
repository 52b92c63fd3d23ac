"""The pieces behind :mod:`cosmos_helpers.widgets`: ``items`` (anything viewable as one item with its caption),
``preview`` (small browser-safe transcodes), ``html`` (static HTML for saved notebooks), ``viewers`` (``show``,
``grid``, ``compare``), ``plots``, ``form`` (``GenerateForm``), ``pages`` (linked HTML pages), ``sheet`` (labelled
PNG contact sheets) and ``timeline`` (``batch_timeline``); live or static output: :mod:`cosmos_helpers.display`.
Nothing here imports torch; ipywidgets and matplotlib are imported inside the functions that need them.
"""
