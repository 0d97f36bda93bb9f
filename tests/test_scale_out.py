"""What can be checked here of running on Flink, Spark or Dataflow (docs/scale-out.md):
the runners' options pass through untouched, the transforms survive both of Beam's
pickle libraries, the pipeline survives the Runner API round trip that every portable
runner's job server receives, and shards written through a Beam filesystem URI (not a
local path) come back through the one loader step with the same tables."""

from __future__ import annotations

import os
import pickle as stdlib_pickle  # only to prove the transforms need no more
import shutil
from pathlib import Path
from typing import ClassVar

import apache_beam as beam
import pytest
from apache_beam.internal import pickler
from apache_beam.io.localfilesystem import LocalFileSystem
from apache_beam.options.pipeline_options import (
    FlinkRunnerOptions,
    GoogleCloudOptions,
    PortableOptions,
    SparkRunnerOptions,
    StandardOptions,
    WorkerOptions,
)
from snapshot import snapshot

from faultline.pipeline.beamrun import beam_options, build_pipeline
from faultline.pipeline.run import ingest
from faultline.pipeline.settings import IngestSettings
from faultline.pipeline.staging import Staging
from faultline.pipeline.transforms import ParseCorpus, ParseFiles, WriteShards

SETTINGS = IngestSettings(tz="Europe/Berlin", year=2025, window=(1, 2))


@pytest.mark.parametrize(("runner", "flags", "view", "attr", "value"), [
    ("FlinkRunner", ["flink_master=jobmanager:8081", "environment_type=LOOPBACK",
                     "parallelism=64"], FlinkRunnerOptions, "flink_master", "jobmanager:8081"),
    ("SparkRunner", ["--spark_master_url=spark://master:7077", "environment_type=DOCKER"],
     SparkRunnerOptions, "spark_master_url", "spark://master:7077"),
    ("DataflowRunner", ["project=my-project", "region=us-central1",
                        "temp_location=gs://bucket/tmp", "num_workers=32"],
     GoogleCloudOptions, "project", "my-project"),
    ("PortableRunner", ["job_endpoint=localhost:8099", "environment_type=EXTERNAL",
                        "environment_config=localhost:50000"],
     PortableOptions, "job_endpoint", "localhost:8099"),
])
def test_runner_options_pass_through(runner, flags, view, attr, value):
    got, options = beam_options(runner, 1, flags)
    assert got == runner  # any runner name is handed to Beam as is
    assert getattr(options.view_as(view), attr) == value


def test_dataflow_worker_count_reaches_beam():
    _, options = beam_options("DataflowRunner", 1, ["num_workers=32",
                                                    "max_num_workers=128"])
    assert options.view_as(WorkerOptions).num_workers == 32
    assert options.view_as(WorkerOptions).max_num_workers == 128


def test_local_runs_never_ask_for_prism():
    runner, options = beam_options("DirectRunner", 2, [])
    assert type(runner).__name__ == "FnApiRunner"
    assert options.view_as(StandardOptions).runner is None
    flags = options.get_all_options()
    assert flags["direct_num_workers"] == 2
    # the workers are processes: Beam's own worker, run deaf to Ctrl-C (the driver's)
    env = runner._default_environment
    assert type(env).__name__ == "SubprocessSDKEnvironment"
    assert env.command_string.startswith("trap '' INT; exec ")
    assert env.command_string.endswith("-m apache_beam.runners.worker.sdk_worker_main")


@pytest.mark.parametrize("make", [
    lambda: ParseFiles(SETTINGS),
    lambda: WriteShards("gs://bucket/shards/faultline-0123"),
    lambda: ParseCorpus("s3://bucket/paths.jsonl", SETTINGS, "s3://bucket/shards", 64),
], ids=["ParseFiles", "WriteShards", "ParseCorpus"])
def test_transforms_pickle_without_driver_state(make):
    """Cluster runners ship DoFns pickled with Beam's pickler (cloudpickle by default).
    The transforms also pickle with the standard library's pickler, which refuses
    lambdas, closures and open handles: they hold their settings and nothing else."""
    obj = make()
    for back in (pickler.loads(pickler.dumps(obj)), stdlib_pickle.loads(stdlib_pickle.dumps(obj))):
        assert type(back) is type(obj)
        for attr in ("settings", "staging", "batch_size"):
            assert getattr(back, attr, None) == getattr(obj, attr, None)


class _RemoteFS(LocalFileSystem):
    """A stand-in for gs:// or s3://: ``fltest://<abs path>`` stored on local disk.

    Beam picks a filesystem by URI scheme from the subclasses of ``FileSystem``, so
    defining this class registers it; every path the pipeline and the loader pass in
    carries the scheme, exactly as with a real object store."""

    PREFIX = "fltest://"

    @classmethod
    def scheme(cls) -> str:
        return "fltest"

    created: ClassVar[list[str]] = []  # every URI written through this filesystem

    def _local(self, path: str) -> str:
        return path.removeprefix(self.PREFIX)  # LocalFileSystem calls itself with both

    def join(self, base: str, *paths: str) -> str:
        if not base.startswith(self.PREFIX):  # LocalFileSystem's own listing calls
            return os.path.join(base, *paths)
        return self.PREFIX + os.path.join(self._local(base), *paths)

    def create(self, path, *args, **kwargs):
        _RemoteFS.created.append(path)
        return super().create(self._local(path), *args, **kwargs)

    def open(self, path, *args, **kwargs):
        return super().open(self._local(path), *args, **kwargs)

    def match(self, patterns, limits=None):
        results = super().match([self._local(p) for p in patterns], limits)
        for pattern, r in zip(patterns, results, strict=True):
            if pattern.startswith(self.PREFIX):  # answer in the caller's terms
                for m in r.metadata_list:
                    m.path = self.PREFIX + m.path
        return results

    def delete(self, paths):
        return super().delete([self._local(p) for p in paths])


def test_the_pipeline_survives_the_runner_api_round_trip(tmp_path):
    """Flink, Spark and Dataflow job servers receive the pipeline as a Runner API
    proto; building it from the proto again must keep every transform."""
    (tmp_path / "paths.jsonl").write_text("")
    p = beam.Pipeline()
    build_pipeline(p, f"fltest://{tmp_path}/paths.jsonl", SETTINGS, f"fltest://{tmp_path}")
    proto = p.to_runner_api()
    names = {t.unique_name for t in proto.components.transforms.values()}
    assert {"ParseCorpus", "ParseCorpus/ReadPaths", "ParseCorpus/Spread",
            "ParseCorpus/Parse", "ParseCorpus/Write"} <= names
    again = beam.Pipeline.from_runner_api(proto, p.runner, p._options)
    assert len(again.to_runner_api().components.transforms) == len(
        proto.components.transforms)
    for unrun in (p, again):  # a pipeline removes its temp directory only when run
        shutil.rmtree(unrun.local_tempdir, ignore_errors=True)


def test_shards_written_through_a_filesystem_uri_load_the_same(tmp_path, repo_root):
    corpus = repo_root / "fixtures" / "sample" / "corpus" / "hosts" / "node0001"
    bucket = tmp_path / "bucket"
    keep = bucket / "someone-elses-data.txt"
    keep.parent.mkdir()
    keep.write_text("not faultline's\n")
    remote = tmp_path / "remote.duckdb"
    ingest([corpus], remote, shards=f"fltest://{bucket}")
    local = tmp_path / "local.duckdb"
    ingest([corpus], local)
    assert snapshot(remote) == snapshot(local)
    assert snapshot(remote)["events"]  # a real comparison, not two empty tables
    written = [u for u in _RemoteFS.created if u.startswith(f"fltest://{bucket}/faultline-")]
    # (file_offsets: the host's kern.log is one a re-run may continue)
    assert {u.rsplit("/", 2)[1] for u in written if u.endswith(".parquet")} == {
        "files", "events", "rejects", "file_offsets"}
    # the shards went to the bucket, under faultline's own prefix, and were cleaned up
    assert [p.name for p in bucket.iterdir()] == ["someone-elses-data.txt"]
    assert not remote.with_name(remote.name + ".staging").exists()


def test_shard_locations_are_faultlines_own(tmp_path):
    """A --shards directory is shared: faultline writes and clears a subdirectory named
    after the database, never the directory itself."""
    db = tmp_path / "a.duckdb"
    s = Staging.for_db(db, str(tmp_path / "shared"))
    assert Path(s.uri).parent == tmp_path / "shared"
    assert Path(s.uri).name.startswith("faultline-")
    assert Staging.for_db(tmp_path / "b.duckdb", str(tmp_path / "shared")).uri != s.uri
    remote = Staging.for_db(db, "gs://bucket/x")
    assert remote.uri.startswith("gs://bucket/x/faultline-")
    assert remote.local == db.with_name("a.duckdb.staging")
    shutil.rmtree(tmp_path / "shared", ignore_errors=True)
