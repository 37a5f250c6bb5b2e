"""One module per command, named after it (`upgrade`, `try_`, `trials`): the operation a thin click command in cli/
calls, composing the layers below it (report, checks, envs, stacks) visibly, and returning a typed result that a view
renders (docs/architecture.md)."""
