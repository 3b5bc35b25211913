# Which tests the sanitized half runs (scripts/test-sanitized.sh), and so which ones scripts/coverage.sh credits to it.
# Sourced. Labels left out: the real model's and the real pair's (hours instrumented at V = 262,144 and 151,936) and
# lm-eval's harness (the server tests run its HTTP paths instrumented). Tests left out by name: their klspec lines are
# all covered by the rest of the selection (scripts/coverage.sh on 2026-12-06: the same 5,651 src/ lines with and
# without them), and instrumented they took 100 s (399 MBPP+ solutions run in the sandbox) and 83 s (haproxy in front
# of three servers). And the tests that run no klspec code at all (Python tools and a shell script: the testbed's
# generator, growth and export, the fetch script, the pooled-sweeps script), 29 s of the sanitized run for nothing.
sanitized_excluded_labels="real-model|real-pair|lm-eval"
sanitized_excluded_tests='^CodeBenchmarks[.]MbppPlusCanonicalSolutionsAllPass$|^deploy[.]balanced$|^testbed[.]|^scripts[.]fetch_real_model$|^bench[.]pooled_sweeps$'
