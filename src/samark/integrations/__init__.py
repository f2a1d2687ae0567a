"""samark inside other toolkits: MarkLLM's pipelines (:mod:`samark.integrations.markllm`,
the ``markllm`` extra) and the stubs that keep MarkLLM offline
(:mod:`samark.evaluation.markllm_offline`)."""
