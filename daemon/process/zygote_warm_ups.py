"""First use, paid once in the zygote: what popular libraries set up the first time a notebook
uses them, run here after the library is pre-imported so that every forked kernel starts with it
done. One entry per top-level module; each a few lines that leave no trace (no open figure, no
output, no file, no thread, nothing in a user's namespace). The zygote (daemon/process/zygote.py)
runs each first in a probe child and checks for traces there; a warm-up that fails or leaves one
is dropped and reported in kpoold's status, never fatal.

Each takes the pre-built ZMQInteractiveShell, or None when kernels are not pre-built (then the
formatters are each kernel's own and only the library's part is warmed). Imports go inside the
functions: this file is run in the zygote's namespace before anything is pre-imported."""


def warm_matplotlib(shell):
    # The inline backend's path to a PNG: rcParams and the backend module, the font cache and
    # the first FT2Font, the Agg canvas and the PNG writer. A Figure of its own, not pyplot's:
    # nothing is registered with pyplot's figure manager, so no kernel inherits an open figure.
    import io
    import matplotlib
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    import matplotlib_inline.backend_inline  # noqa: F401  (what %matplotlib inline loads)
    fig = Figure(figsize=(2, 2), dpi=matplotlib.rcParams["figure.dpi"])
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    ax.plot([0, 1, 2], [0, 1, 4], label="warm")
    ax.set_title("warm-up")
    ax.legend()
    fig.savefig(io.BytesIO(), format="png", bbox_inches="tight")
    if shell is not None:
        # IPython's PNG formatter for figures, as `display(fig)` and the inline backend use it.
        from IPython.core.pylabtools import print_figure
        print_figure(fig, "png")
    # The fonts it opened stay open in matplotlib's cache: file descriptors every kernel would
    # share, offsets included. Closed; a kernel's first figure opens its own (the font list,
    # the backend and the rest stay warm).
    import gc
    from matplotlib import font_manager
    del fig, ax
    font_manager._get_font.cache_clear()
    gc.collect()


def warm_pandas(shell):
    # A DataFrame's text and HTML reprs (the formatting machinery and its options), and
    # IPython's formatters dispatching on the type.
    import pandas as pd
    df = pd.DataFrame({"a": [1, 2, 3], "b": [0.5, 1.5, 2.5], "c": ["x", "y", "z"]})
    repr(df)
    df._repr_html_()
    df.describe().to_json()
    repr(df["a"])
    if shell is not None:
        shell.display_formatter.format(df)
        shell.display_formatter.format(df["a"])


def warm_numpy(shell):
    import numpy as np
    a = np.arange(12.0).reshape(3, 4)
    repr(a)
    str(a.mean(axis=0))
    if shell is not None:
        shell.display_formatter.format(a)


WARM_UPS = {
    "matplotlib": warm_matplotlib,
    "pandas": warm_pandas,
    "numpy": warm_numpy,
}
