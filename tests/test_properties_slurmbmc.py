"""Properties of the Slurm and BMC shape parsers on any input: arbitrary text, and real
lines (the shape tests' own) damaged byte by byte. Every parse keeps the line
accounting, builds table rows, and is deterministic; a ``slurm-<jobid>.out`` parses the
same alone and in a batch. The checks are ``test_properties``'s."""

from __future__ import annotations

from pathlib import Path

import pytest
import test_parse_bmc_shapes as bmc
import test_parse_slurm_shapes as shapes
from hypothesis import given
from hypothesis import strategies as st
from mutations import mutated_file, text_of
from test_properties import check_parse

from faultline.pipeline.parsers import joblog, redfish, sacct, slurm_nodes, slurmd
from faultline.pipeline.records import ParseContext
from faultline.pipeline.text import split_lines

DATA = Path(__file__).parent / "data" / "shapes"
WINDOW = shapes.NOV19
PARSE = {
    "slurm_out": (joblog.parse, ParseContext(path="o/slurm-5.out", job_id="5",
                                             job_window=WINDOW)),
    "slurmd": (slurmd.parse, ParseContext(path="hosts/cn106/slurmd.log", host="cn106")),
    "slurm_nodes": (slurm_nodes.parse, ParseContext(path="state/sinfo-R.txt")),
    "bmc": (redfish.parse_any, ParseContext(path="hosts/n1/sel.json", host="n1")),
    "sacct_json": (sacct.parse, ParseContext(path="slurm/sacct.json")),
}
POOLS = {
    "slurm_out": shapes.OUT,
    "slurmd": split_lines(shapes.SLURMD),
    "slurm_nodes": split_lines(shapes.SINFO_R) + split_lines(shapes.SCONTROL),
    "bmc": bmc.SEL_LIST + split_lines(bmc.FREEIPMI) + split_lines(bmc.IDRAC_JSONL)
    + split_lines((DATA / "redfish-dmtf-public-rackmount1-sel.json").read_text()),
    "sacct_json": split_lines((DATA / "sacct-json-clockwork-excerpt.json").read_text()),
}


def check(name: str, text: str) -> None:
    parse, ctx = PARSE[name]
    fp = parse(text, ctx)
    check_parse(fp, text)
    assert parse(text, ctx) == fp
    if name == "slurm_out":
        many = joblog.parse_many([(split_lines("0: x\n"), ctx), (split_lines(text), ctx)])
        assert many[1] == fp


@pytest.mark.parametrize("name", sorted(PARSE))
@given(text=st.text())
def test_any_text(name, text):
    check(name, text)


@pytest.mark.parametrize("name", sorted(PARSE))
@given(data=st.data())
def test_damaged_real_lines(name, data):
    check(name, text_of(data.draw(mutated_file(POOLS[name]))))


@pytest.mark.parametrize("name", sorted(PARSE))
def test_whole_real_files(name):
    check(name, "\n".join(POOLS[name]) + "\n")
