"""The plot set-up every report shares: matplotlib without a display, or None where it is absent
(a report then writes its tables and says the plots were left out)."""


def pyplot():
    """matplotlib.pyplot on the Agg backend; None where matplotlib is not installed."""
    try:
        import matplotlib
    except ImportError:
        return None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt



def require(who):
    """pyplot() where a report cannot go on without it: ImportError naming the report otherwise."""
    plt = pyplot()
    if plt is None:
        raise ImportError(f"{who}: matplotlib is not installed (Debian: apt-get install python3-matplotlib)")
    return plt
