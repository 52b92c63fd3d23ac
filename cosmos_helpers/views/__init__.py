"""The pieces behind :mod:`cosmos_helpers.widgets` (live or static output: :mod:`cosmos_helpers.display`).

Nothing here imports torch; ipywidgets and matplotlib are imported inside the functions that need them.
"""
