"""The pieces behind :mod:`cosmos_helpers.widgets` (previews, HTML, plots, the generate form); whether output is
live or static, and showing it once, is :mod:`cosmos_helpers.display`.

``items``    turn a Generation, a file path or a frame array into one viewable item with its caption
``preview``  small browser-safe preview transcodes (H.264 yuv420p + AAC), posters, thumbnails, data URIs
``html``     static HTML (players, contact sheets, side-by-side, slider) that reads well in a saved notebook
``viewers``  ``show``, ``grid``, ``compare``: ipywidgets in a live kernel, static HTML elsewhere
``plots``    ``frame_strip``, ``sound_plot``, ``join_plot`` and pictures of action trajectories
``form``     ``GenerateForm``
``pages``    linked HTML pages beside the files they show (the output gallery, a sweep's report)
``sheet``    one labelled contact sheet as a PNG (a sweep's matrix, the tiny world's training strips)
``timeline`` ``batch_timeline``: where and when each item of a batch ran

Nothing here imports torch; ipywidgets and matplotlib are imported inside the functions that need them.
"""
