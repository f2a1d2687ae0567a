"""samark on real vLLM (CPU): SAMark's candidates, the layered mark's token layer inside
vLLM's sampler, concurrent draws, vLLM's own Gumbel watermark, and the clear errors."""

from __future__ import annotations

import pytest
import torch

from samark.errors import SamarkError
from samark.keys import WatermarkKey
from samark.sampling.base import SampleRequest, SamplingParams
from samark.schemes import create_scheme
from samark.segment import split_sentences

pytestmark = pytest.mark.vllm

PREFIX = (
    "The city council voted on Tuesday to approve a new budget for the public schools. "
    "The plan adds money for teachers and repairs. Parents had asked for smaller classes."
)
HUMAN = (
    "The council approved the budget on Tuesday after a long debate. Residents had asked for "
    "more money for parks and libraries. The mayor said the plan balances those needs. "
    "Opponents argued that taxes would rise next year. The vote was five to two."
)


def _key(minilm, tag: bytes) -> WatermarkKey:
    return WatermarkKey(tag.ljust(32, b"0"), minilm.identity)


def test_candidates_are_one_complete_sentence_each(vllm_engine) -> None:
    """n=N draws end each row at its first complete sentence (inside vLLM's sampler), the
    same seed draws the same candidates, and a repeated prefix comes from vLLM's cache."""
    params = SamplingParams(max_sentence_tokens=64)
    batch = vllm_engine.sample(PREFIX, 16, params, seed=7)
    assert len(batch.candidates) == 16
    complete = batch.complete
    assert len(complete) >= 12, [c.text for c in batch.candidates]
    for text in complete:
        assert len(split_sentences(text)) == 1, text
        assert text.rstrip().endswith((".", "!", "?", '"', "'", "”", ")")), text
    # rows stop a token or two past their sentence, far below the cap of 64 tokens
    assert batch.tokens_sampled < 0.75 * 16 * 64
    again = vllm_engine.sample(PREFIX, 16, params, seed=7)
    assert [c.text for c in again.candidates] == [c.text for c in batch.candidates]
    # vLLM caches whole blocks of a prompt: a prompt of several blocks, drawn twice
    block = int(vllm_engine.llm.llm_engine.vllm_config.cache_config.block_size)
    long_prefix = " ".join([HUMAN] * (3 * block // 40 + 2))
    assert len(vllm_engine.encode(long_prefix, 64)) > 2 * block
    first, again = (
        vllm_engine._generate(
            [vllm_engine.encode(long_prefix, 64)],
            [vllm_engine._params(2, 0.7, 0.95, 4, seed, _plain())],
        )[0]
        for seed in (1, 2)
    )
    assert (again.num_cached_tokens or 0) >= block, (first.num_cached_tokens, block)


def _plain():
    from samark.sampling.vllm_processors import RowRules

    return RowRules(sampling=(0.7, 0.95))


def test_many_seeded_rows_of_a_short_prompt_draw(vllm_engine) -> None:
    """64 seeded rows of a 90-token prompt pass the step's token budget (4,096): with
    vLLM's chunked prefill its CPU runner split a row's prefill and died ("CPU Generator
    does not use offset"); the engine prefills whole prompts on a CPU."""
    prefix = " ".join([HUMAN] * 2)
    assert 64 * len(vllm_engine.encode(prefix, 64)) > 4096
    batch = vllm_engine.sample(prefix, 64, SamplingParams(), seed=3)
    assert len(batch.candidates) == 64 and len(batch.complete) >= 48


def test_concurrent_draws_run_in_one_generate_call(vllm_engine) -> None:
    """Several callers' draws in one ``sample_many``: one vLLM call, each its own prefix."""
    params = SamplingParams()
    prefixes = [PREFIX, "Scientists said on Monday that the river had flooded.", HUMAN]
    batches = vllm_engine.sample_many(
        [SampleRequest(p, 8, params, seed=i) for i, p in enumerate(prefixes)]
    )
    assert len(batches) == 3
    assert len({b.seconds for b in batches}) == 1  # one call
    for prefix, b in zip(prefixes, batches, strict=True):
        assert len(b.candidates) == 8 and len(b.complete) >= 5
        assert b.prompt_tokens == len(vllm_engine.encode(prefix, 64))


def test_the_layered_mark_through_vllm_carries_both_layers(vllm_engine, minilm) -> None:
    """samark-layered writes through vLLM with its token layer in vLLM's sampler; the
    scheme's own detector (the transformers engine's texts are scored by the same one)
    finds the token layer, and another key does not."""
    key, other = _key(minilm, b"vllm-layered-a"), _key(minilm, b"vllm-layered-b")
    params = {"embedder": minilm, "engine": vllm_engine, "candidates": 16}
    scheme = create_scheme("samark-layered", key=key, **params)
    gen = scheme.generate(PREFIX, max_new_sentences=6, seed=3)
    assert len(gen.sentences) == 6
    mine = scheme.detect(gen.text)
    assert mine.details["p_token"] < 1e-3, mine.details
    theirs = create_scheme("samark-layered", key=other, **params).detect(gen.text)
    assert theirs.details["p_token"] > 0.01 and theirs.p_value > 0.01


def test_what_vllm_cannot_do_is_a_clear_error(vllm_engine, minilm) -> None:
    key = _key(minilm, b"vllm-errors")
    for option in ({"prune_at": 8}, {"steer": 0.5}):
        with pytest.raises(SamarkError, match="needs the local transformers engine"):
            create_scheme(
                "samark", key=key, embedder=minilm, engine=vllm_engine, candidates=4, **option
            )
    with pytest.raises(SamarkError, match="does not prune"):
        pruner = type("P", (), {"at": 4, "keep": 2, "score": lambda self, t: [0.0] * len(t)})()
        vllm_engine.sample_many([SampleRequest(PREFIX, 4, SamplingParams(), prune=pruner)])


def test_an_engine_option_vllm_refuses_is_a_clear_error() -> None:
    from samark.sampling.vllm_engine import VLLMEngine

    with pytest.raises(SamarkError, match="vLLM refused the engine options"):
        VLLMEngine("smollm2-135m-instruct", no_such_engine_option=1)


def test_vllm_gumbel_picks_what_vllms_gumbel_watermarker_picks(vllm_engine, minilm) -> None:
    """Every token vllm-gumbel wrote at a fresh context is the token vLLM's
    ``GumbelWatermarker`` picks from the model's distribution there (temperature, vLLM's
    top-p, the special tokens suppressed), the model's logits recomputed here by
    transformers; a repeated context is sampled without the mark, as vLLM does."""
    from transformers import AutoModelForCausalLM
    from vllm.v1.sample.ops.topk_topp_sampler import apply_top_k_top_p
    from vllm.v1.watermarking import GumbelWatermarker

    from samark.models import resolve_generator

    scheme = create_scheme("vllm-gumbel", key=_key(minilm, b"vllm-gumbel"), engine=vllm_engine)
    c = scheme.config
    prompt = PREFIX
    # the tokens vLLM wrote (vllm-gumbel's request), with the prompt as the engine encoded it
    from samark.sampling.vllm_engine import TextRequest
    from samark.sampling.vllm_processors import GumbelRule

    special = sorted({int(i) for i in vllm_engine.tokenizer.all_special_ids})
    rule = GumbelRule(scheme._vllm_key, c.context_width)
    written = vllm_engine.write_many(
        [TextRequest(prompt, 120, 4, seed=5, suppress=tuple(special), gumbel=rule)]
    )[0]
    tokens = list(written.tokens)
    assert written.finish_reason == "sentences"
    assert len(split_sentences(vllm_engine.decode(tokens))) == 5  # 4, and the next begun
    prompt_ids = vllm_engine.encode(prompt, 120)
    model = AutoModelForCausalLM.from_pretrained(
        resolve_generator("smollm2-135m-instruct")[1], dtype=torch.float32
    )
    with torch.inference_mode():
        logits = model(torch.tensor([prompt_ids + tokens])).logits[0, len(prompt_ids) - 1 : -1]
    marker = GumbelWatermarker(rule.key, rule.context_width)
    width, seen, fresh, same = rule.context_width, set(), 0, 0
    for t, tok in enumerate(tokens):
        context = tuple(([-1] * width + tokens[:t])[-width:])
        if context in seen:
            continue
        seen.add(context)
        row = logits[t].clone()
        row[special] = float("-inf")
        processed = apply_top_k_top_p(
            (row / c.temperature).unsqueeze(0), None, torch.tensor([c.top_p])
        )
        pick = int(marker.sample(processed, torch.tensor([context])).token_ids[0])
        fresh += 1
        same += pick == tok
    assert fresh >= 60
    # the logits of vLLM's CPU kernels and of transformers agree to float rounding: a
    # near-tie may go the other way, nothing more
    assert same / fresh >= 0.97, (same, fresh)


def test_vllm_gumbel_detects_its_own_text_and_not_human_or_another_key(vllm_engine, minilm) -> None:
    from samark.testing import check_scheme

    key, other = _key(minilm, b"vllm-gumbel-a"), _key(minilm, b"vllm-gumbel-b")
    scheme = create_scheme("vllm-gumbel", key=key, engine=vllm_engine)
    gens = scheme.generate_batch(
        [PREFIX, "Scientists said on Monday that"], max_new_sentences=6, seed=2
    )
    for gen in gens:
        assert len(gen.sentences) == 6
        assert scheme.detect(gen.text).p_value < 1e-4
        theirs = create_scheme("vllm-gumbel", key=other, engine=vllm_engine)
        assert theirs.detect(gen.text).p_value > 0.001
    assert scheme.detect(HUMAN).p_value > 0.01
    check_scheme(
        lambda k: create_scheme("vllm-gumbel", key=k, engine=vllm_engine),
        key,
        other,
        [HUMAN],
        generate=True,
    )


def test_the_cli_writes_through_vllm_and_detects(vllm_engine, minilm, tmp_path) -> None:
    """``samark generate --engine vllm:MODEL`` (the session's engine: one per process),
    then ``samark detect`` on what it wrote."""
    import json

    from typer.testing import CliRunner

    from samark.cli import app

    key_file = tmp_path / "cli.key"
    key = _key(minilm, b"vllm-cli")
    key.save(key_file)
    runner = CliRunner()
    common = ["--key", str(key_file), "--scheme", "samark-layered"]
    made = runner.invoke(
        app,
        [
            "generate", "--text", PREFIX, *common, "--engine", "vllm:smollm2-135m-instruct",
            "--candidates", "8", "--sentences", "3", "--seed", "4", "--json",
        ],
    )  # fmt: skip
    assert made.exit_code == 0, made.output
    record = json.loads(made.stdout.splitlines()[-1])
    assert len(record["sentences"]) == 3
    text = tmp_path / "out.txt"
    text.write_text(record["text"])
    found = runner.invoke(app, ["detect", str(text), *common])
    assert found.exit_code == 0, found.output
    assert json.loads(found.stdout.splitlines()[0])["p_value"] < 0.01
    assert json.loads(key_file.read_text())["secret"] not in made.output + found.output
