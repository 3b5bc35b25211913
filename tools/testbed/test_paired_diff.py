import unittest

import paired_diff


class PairedChange(unittest.TestCase):
    def test_hand_computed(self):
        # one lost, one gained of 5: no change, se = sqrt(2 - 0) / 5
        base = {"a": True, "b": True, "c": False, "d": False, "e": True}
        result = {"a": True, "b": False, "c": True, "d": False, "e": True}
        n, lost, gained, change, half = paired_diff.paired_change(base, result)
        self.assertEqual((n, lost, gained), (5, 1, 1))
        self.assertAlmostEqual(change, 0.0)
        self.assertAlmostEqual(half, 196 * 2 ** 0.5 / 5)
        # two lost of 4: -50 points, se = sqrt(2 - 4 / 4) / 4
        n, lost, gained, change, half = paired_diff.paired_change({i: True for i in "wxyz"},
                                                                  {"w": False, "x": False, "y": True, "z": True})
        self.assertEqual((n, lost, gained, change), (4, 2, 0, -50.0))
        self.assertAlmostEqual(half, 196 * 1 / 4)

    def test_only_shared_problems_count(self):
        n, lost, gained, _, _ = paired_diff.paired_change({"a": True, "b": True}, {"b": False, "c": True})
        self.assertEqual((n, lost, gained), (1, 1, 0))
        with self.assertRaises(ValueError):
            paired_diff.paired_change({"a": True}, {"b": True})


if __name__ == "__main__":
    unittest.main()
