"""A job that never makes a step: its main thread blocks on a lock it already holds, before any
training starts (the shape of the hang brim's own channel once caused on a GPU host). Takes the
micro-batch as its first argument so that brim tune has a knob to vary."""
import sys
import threading


def start_up(batch_size: int) -> None:
    lock = threading.Lock()
    lock.acquire()
    lock.acquire()  # never returns
    print("unreachable", batch_size)


if __name__ == "__main__":
    start_up(int(sys.argv[1]))
