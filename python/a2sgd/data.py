"""The data sets a2sgd's runs read, found where a2sgd-train finds them (docs/data.md): the data home
($A2SGD_DATA_DIR, else ${XDG_DATA_HOME:-~/.local/share}/a2sgd), filled by a2sgd-fetch-data."""
import gzip
import os
import struct

__all__ = ["data_home", "find_dataset", "load_fashion_mnist"]


def data_home():
    """$A2SGD_DATA_DIR, else ${XDG_DATA_HOME:-~/.local/share}/a2sgd (as a2sgd-train)."""
    return os.environ.get("A2SGD_DATA_DIR") or os.path.join(
        os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share"), "a2sgd")


def find_dataset(name, marker):
    """The first of <data home>/<name> and (Fashion-MNIST) Debian's package folder that holds
    `marker`; None when neither does."""
    places = [os.path.join(data_home(), name)]
    if name == "fashion-mnist":
        places.append("/usr/share/datasets/fashion-mnist")
    return next((d for d in places if os.path.exists(os.path.join(d, marker))), None)


def _idx(path):
    import torch
    with gzip.open(path, "rb") as f:
        data = f.read()
    magic, count = struct.unpack(">II", data[:8])
    if magic == 2051:
        rows, cols = struct.unpack(">II", data[8:16])
        return torch.frombuffer(bytearray(data[16:]), dtype=torch.uint8).view(count, rows * cols).float() / 255.0
    if magic == 2049:
        return torch.frombuffer(bytearray(data[8:]), dtype=torch.uint8).long()
    raise ValueError(f"{path}: not an IDX image or label file (magic {magic})")


def load_fashion_mnist():
    """(train images, train labels, test images, test labels) as torch tensors, the pixels
    standardised with the training set's mean and deviation (as a2sgd-train does). Raises
    FileNotFoundError naming the fetch command when the data set is not there."""
    d = find_dataset("fashion-mnist", "train-images-idx3-ubyte.gz")
    if d is None:
        raise FileNotFoundError(f"Fashion-MNIST is not in {os.path.join(data_home(), 'fashion-mnist')}: "
                                "fetch it with `a2sgd-fetch-data fashion-mnist`")
    xtr, ytr = _idx(f"{d}/train-images-idx3-ubyte.gz"), _idx(f"{d}/train-labels-idx1-ubyte.gz")
    xte, yte = _idx(f"{d}/t10k-images-idx3-ubyte.gz"), _idx(f"{d}/t10k-labels-idx1-ubyte.gz")
    mean, std = xtr.mean(), xtr.std()
    return (xtr - mean) / std, ytr, (xte - mean) / std, yte
