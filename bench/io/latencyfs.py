"""A read-only FUSE mirror of a folder whose every file open waits a fixed latency first: what a
training job sees of a network file system or an object-store mount (NFS over a WAN, gcsfuse,
mountpoint-s3) with no local cache. Bench infrastructure, not part of brim: the job reads its files
unchanged through the mount, so "I/O-bound" comes from storage, not from a sleep in the script.

    python latencyfs.py SOURCE MOUNTPOINT --latency-ms 40     # foreground; unmount with fusermount -u

Needs /dev/fuse, libfuse2 and fusepy. Opens run in parallel (one FUSE thread each), as requests to
remote storage do; metadata (stat, listing) is served at once, as the mounts above cache it.
"""

import argparse
import errno
import os
import time

from fuse import FUSE, FuseOSError, Operations


class LatencyFS(Operations):
    def __init__(self, root: str, latency_s: float) -> None:
        self.root = os.path.realpath(root)
        self.latency_s = latency_s

    def _path(self, path: str) -> str:
        return os.path.join(self.root, path.lstrip("/"))

    def getattr(self, path, fh=None):
        try:
            st = os.lstat(self._path(path))
        except FileNotFoundError:
            raise FuseOSError(errno.ENOENT)
        keys = ("st_atime", "st_ctime", "st_gid", "st_mode", "st_mtime", "st_nlink", "st_size", "st_uid")
        return {k: getattr(st, k) for k in keys}

    def readdir(self, path, fh):
        return [".", ".."] + os.listdir(self._path(path))

    def open(self, path, flags):
        if flags & (os.O_WRONLY | os.O_RDWR):
            raise FuseOSError(errno.EROFS)
        time.sleep(self.latency_s)
        return os.open(self._path(path), os.O_RDONLY)

    def read(self, path, size, offset, fh):
        return os.pread(fh, size, offset)

    def release(self, path, fh):
        os.close(fh)
        return 0

    def statfs(self, path):
        st = os.statvfs(self.root)
        keys = ("f_bavail", "f_bfree", "f_blocks", "f_bsize", "f_favail", "f_ffree", "f_files", "f_flag", "f_frsize", "f_namemax")
        return {k: getattr(st, k) for k in keys}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("source")
    p.add_argument("mountpoint")
    p.add_argument("--latency-ms", type=float, default=40.0)
    args = p.parse_args()
    FUSE(LatencyFS(args.source, args.latency_ms / 1000.0), args.mountpoint, foreground=True, nothreads=False, ro=True)


if __name__ == "__main__":
    main()
