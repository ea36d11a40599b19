"""Where a DataLoader's num_workers comes from: the job's own argparse option, told in its loader
event (num_workers_from), read from the file that builds the loader."""

import os
import textwrap

import pytest

from brim import _loader_args

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def write(tmp_path, code):
    path = tmp_path / "train.py"
    path.write_text(textwrap.dedent(code))
    return str(path)


@pytest.mark.parametrize("declare,use,dest,flags", [
    ('p.add_argument("-j", "--threads", type=int)', "num_workers=args.threads", "threads", ["-j", "--threads"]),
    ('p.add_argument("--num-proc", type=int)', "num_workers=int(args.num_proc)", "num_proc", ["--num-proc"]),
    ('p.add_argument("-w", dest="loaders", type=int)', "num_workers=min(opt.loaders, 8)", "loaders", ["-w"]),
])
def test_the_flag_behind_num_workers(tmp_path, declare, use, dest, flags):
    path = write(tmp_path, """
        import argparse
        p = argparse.ArgumentParser()
        %s
        args = opt = p.parse_args()
        loader = DataLoader(
            data,
            %s,
        )
    """ % (declare, use))
    source = _loader_args.workers_source("%s:6" % path)
    assert source is not None and source["dest"] == dest and source["flags"] == flags


def test_a_name_assigned_from_the_namespace_and_nothing_for_a_literal(tmp_path):
    path = write(tmp_path, """
        p.add_argument("--cpus", type=int)
        args = p.parse_args()
        workers = args.cpus
        loader = DataLoader(data, num_workers=workers)
        other = DataLoader(data, num_workers=4)
    """)
    assert _loader_args.workers_source("%s:5" % path)["flags"] == ["--cpus"]
    assert _loader_args.workers_source("%s:6" % path) is None
    assert _loader_args.workers_source("/nonexistent.py:3") is None
    assert _loader_args.workers_source(None) is None


def test_in_the_loader_event_of_a_real_job(srv):
    from test_attach import run

    out = run("import runpy, sys; sys.argv = ['threads_flag.py', '-j', '1', '--steps', '3', '--load-ms', '0']; "
              "runpy.run_path(%r, run_name='__main__')" % os.path.join(REPO, "test", "jobs", "threads_flag.py"), srv)
    assert out.returncode == 0, out.stderr
    loaders = [m for m in srv.messages("event") if m["kind"] == "loader"]
    assert loaders and loaders[0]["details"]["num_workers"] == 1
    assert loaders[0]["details"]["num_workers_from"] == {"dest": "threads", "flags": ["-j", "--threads"], "expr": "args.threads"}
