"""Helpers the task files name with !function."""


def seeded_shuffle(dataset):
    """The split in a fixed random order, so that --limit N takes N problems across categories, not the first
    category's (MMLU-Pro's test file is sorted by category)."""
    return dataset.shuffle(seed=0)
