"""The OpenAI-compatible server engine against a real server on loopback: ``transformers
serve`` (transformers' own FastAPI server) serving the SmolLM2 weights (``conftest.py``).
It ignores ``n`` and answers one choice per request, so it also exercises the "fewer than
N choices" path."""

from __future__ import annotations

import pytest

from samark.sampling.base import SamplingParams

pytest.importorskip("fastapi", reason="`transformers serve` needs fastapi (samark[test])")
pytest.importorskip("uvicorn", reason="`transformers serve` needs uvicorn (samark[test])")
pytest.importorskip("openai", reason="the server engine needs openai (samark[server])")

from samark.sampling.openai_server import OpenAICompletionsEngine, ServerError


@pytest.mark.slow
def test_server_candidates_are_topped_up_to_n(transformers_server) -> None:
    url, model = transformers_server
    sampler = OpenAICompletionsEngine(url, model, max_retries=0)
    batch = sampler.sample(
        "The city council met on Monday to discuss the budget. The mayor said",
        4,
        SamplingParams(max_sentence_tokens=40),
        seed=1,
    )
    assert len(batch.candidates) == 4
    assert sampler.last_requests > 1  # the server answered fewer than n choices
    assert batch.tokens_sampled > 0
    complete = batch.complete
    assert complete and all(t.strip() and t.strip()[-1] in '.!?"' for t in complete)


@pytest.mark.slow
def test_samark_generates_and_detects_through_the_server(
    transformers_server, mpnet, mpnet_key
) -> None:
    from samark import SAMark, SAMarkConfig

    url, model = transformers_server
    scheme = SAMark(
        mpnet_key,
        config=SAMarkConfig.of(candidates=4, max_sentence_tokens=40),
        embedder=mpnet,
        engine=OpenAICompletionsEngine(url, model),
    )
    gen = scheme.generate(
        "Scientists found a new frog species in Peru.", max_new_sentences=1, seed=3
    )
    assert len(gen.sentences) == 1 and gen.tokens_sampled > 0
    assert scheme.detect(gen.text).n_units == 1


@pytest.mark.slow
def test_served_through_a_real_upstream_watermarked_and_passed_through(
    transformers_server, mpnet, mpnet_key, smollm2, served_app, key_forms
) -> None:
    """``samark serve``'s app with SAMark's candidates from the upstream server, and a
    request without the mark passed through to the upstream's own answer."""
    import openai

    from samark import SAMark, SAMarkConfig
    from samark.serving import ServeSettings, Upstream, scheme_app, tokenizer_chat_renderer

    url, model = transformers_server
    sampler = OpenAICompletionsEngine(url, model)
    scheme = SAMark(
        mpnet_key,
        config=SAMarkConfig.of(candidates=4, max_sentence_tokens=40),
        embedder=mpnet,
        engine=sampler,
    )
    token = "user-token-0123456789abcdef"
    settings = ServeSettings(tokens=frozenset({token}), default_sentences=1)
    upstream = Upstream(openai.AsyncOpenAI(base_url=url, api_key="EMPTY", max_retries=0), model)
    app = scheme_app(
        scheme,
        settings,
        render_chat=tokenizer_chat_renderer(smollm2.tokenizer),
        count_tokens=smollm2.count_tokens,
        upstream=upstream,
    )
    with served_app(app) as base:
        client = openai.OpenAI(base_url=f"{base}/v1", api_key=token, max_retries=0, timeout=300)
        marked = client.completions.create(
            model="samark", prompt="Scientists found a new frog species in Peru.", seed=3
        )
        assert marked.choices[0].text.strip()
        assert marked.model_extra["samark"]["key_id"] == mpnet_key.key_id
        plain = client.chat.completions.create(
            model="samark",
            messages=[{"role": "user", "content": "Say hello."}],
            max_tokens=8,
            extra_body={"watermark": False},
        )
        assert plain.choices[0].message.content  # the upstream's own answer
        assert plain.model.startswith(model)  # the upstream named it, not samark
    for body in (marked.model_dump_json(), plain.model_dump_json()):
        for form in key_forms(mpnet_key._secret):
            assert form not in body


def test_server_refusal_is_a_clear_error(transformers_server) -> None:
    url, _ = transformers_server
    sampler = OpenAICompletionsEngine(url, "no/such-model", max_retries=0, timeout=60)
    with pytest.raises(ServerError, match=r"refused|returned"):
        sampler.sample("Hello.", 2, SamplingParams(max_sentence_tokens=8), seed=0)


def test_server_down_is_a_clear_error(free_port) -> None:
    sampler = OpenAICompletionsEngine(
        f"http://127.0.0.1:{free_port()}/v1", "m", max_retries=0, timeout=5
    )
    with pytest.raises(ServerError, match="unreachable"):
        sampler.sample("Hello.", 2, SamplingParams(max_sentence_tokens=8))
