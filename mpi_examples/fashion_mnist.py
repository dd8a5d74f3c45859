"""Fashion-MNIST from the IDX files of Debian's dataset-fashion-mnist (or any copy of them).

    from fashion_mnist import load
    train_x, train_y, test_x, test_y = load("/usr/share/datasets/fashion-mnist")

Images come back as uint8 arrays of shape (n, 28, 28) (60,000 training images as float32 would
take 188 MB in every rank); `normalize(images)` turns a batch into float32, scaled to [0, 1] and
standardised with the training set's mean and standard deviation (0.2860, 0.3530). Labels come
back as int64 arrays.
Each file may be gzip-compressed (the package ships `*-idx?-ubyte.gz`) or raw.
"""
import gzip
import os
import struct

import numpy as np

DEFAULT_DIR = "/usr/share/datasets/fashion-mnist"
MEAN, STD = 0.2860, 0.3530
FILES = {"train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
         "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")}


def _open(directory, stem):
    for name in (stem + ".gz", stem):
        path = os.path.join(directory, name)
        if os.path.exists(path):
            return gzip.open(path, "rb") if name.endswith(".gz") else open(path, "rb")
    raise FileNotFoundError(f"{stem}[.gz] not found in {directory} (apt-get install dataset-fashion-mnist)")


def read_idx(directory, stem):
    """One IDX file: magic 0x00000801 (labels, u8) or 0x00000803 (images, u8), big-endian dims."""
    with _open(directory, stem) as f:
        data = f.read()
    zero, dtype, ndim = struct.unpack(">HBB", data[:4])
    if zero != 0 or dtype != 0x08:
        raise ValueError(f"{stem}: not an unsigned-byte IDX file")
    dims = struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim])
    array = np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim)
    if array.size != int(np.prod(dims)):
        raise ValueError(f"{stem}: {array.size} bytes of data for dimensions {dims}")
    return array.reshape(dims)


def available(directory=DEFAULT_DIR):
    try:
        for images, labels in FILES.values():
            _open(directory, images).close()
            _open(directory, labels).close()
        return True
    except FileNotFoundError:
        return False


def normalize(images):
    """uint8 images -> standardised float32 (same shape)."""
    return (images.astype(np.float32) * np.float32(1 / 255.0) - np.float32(MEAN)) * np.float32(1 / STD)


def load(directory=DEFAULT_DIR, train_limit=0, test_limit=0):
    """(train_x, train_y, test_x, test_y); a limit > 0 keeps only the first that many samples."""
    out = []
    for split, limit in (("train", train_limit), ("test", test_limit)):
        images, labels = (read_idx(directory, stem) for stem in FILES[split])
        if len(images) != len(labels):
            raise ValueError(f"{split}: {len(images)} images but {len(labels)} labels")
        if limit > 0:
            images, labels = images[:limit], labels[:limit]
        out += [images, labels.astype(np.int64)]
    return tuple(out)
