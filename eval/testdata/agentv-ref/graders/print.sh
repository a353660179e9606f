#!/bin/sh
# A code grader for the reference cases: prints its first argument on
# standard output, its second on standard error (- for nothing), and exits with the third.
# With DUMP set, it also copies its standard input (AgentV's payload) there.
[ -n "${DUMP:-}" ] && cat > "$DUMP" || cat > /dev/null
printf '%s' "$1"
[ "${2:--}" != - ] && printf '%s' "$2" >&2
exit "${3:-0}"
