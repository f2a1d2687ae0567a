"""The evaluation harness: experiments as TOML, cached stages, attacks, metrics, reports."""
