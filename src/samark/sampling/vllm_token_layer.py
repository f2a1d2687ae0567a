"""The token layer inside vLLM: a logits processor for vLLM's V1 engine (``samark[vllm]``).

vLLM loads logits processors by class when the engine starts and configures them per
request through ``SamplingParams.extra_args``. :class:`GreenListLogitsProcessor` wraps a
per-request function (vLLM's ``AdapterLogitsProcessor``) that adds the green-list bias of
:class:`samark.token_layer.GreenListLayer` to the request's logits, its context being the
prompt's and the row's own last tokens. :class:`~samark.sampling.vllm_engine.VLLMSampler`
registers the class and sends the layer's spec with each request of a layered scheme.

Two differences from the local engine, both on the generation side only (detection is the
same): vLLM applies logits processors before temperature and nucleus filtering, so the
nucleus is cut from the biased distribution; and the spec, the layer's derived secret
included, crosses from the Python front end to vLLM's engine-core process on this machine
(never a network). Untested in CI: no GPU there (docs/layered.md).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from vllm.v1.sample.logits_processor import AdapterLogitsProcessor

from samark.token_layer import GreenListLayer

#: the ``SamplingParams.extra_args`` entry that carries a layer's spec
SPEC_ARG = "samark_token_layer"


class GreenListLogitsProcessor(AdapterLogitsProcessor):
    """Adds a green-list bias to the rows of requests that carry a layer spec."""

    def is_argmax_invariant(self) -> bool:
        return False

    def new_req_logits_processor(self, params: Any) -> Callable[..., torch.Tensor] | None:
        spec = (getattr(params, "extra_args", None) or {}).get(SPEC_ARG)
        if not spec:
            return None
        layer = GreenListLayer.from_spec(spec)

        def bias(prompt_ids: list[int], output_ids: list[int], logits: torch.Tensor) -> Any:
            context = (list(prompt_ids[-layer.context :]) + list(output_ids))[-layer.context :]
            row = layer.bias([context], int(logits.shape[-1]))[0]
            return logits + torch.from_numpy(row).to(device=logits.device, dtype=logits.dtype)

        return bias
