"""The Claude agent: an LLM that reads the framework's source, states a hypothesis and moves
one lever, through the Messages API's tool use, with every rule of the playbook
(``registry/playbook.md``) checked in code. ``docs/llm-agent.md`` describes it.

Nothing here is imported unless a campaign asks for ``--agent claude``.
"""
