#!/usr/bin/env python3
"""Writes the inputs of the minimiser-order golden files (README.md).

    python3 make_inputs.py   # inputs/unplaced.sam.gz, inputs/all_unplaced.sam

Unplaced reads (RNAME '*') that stress samtools sort -M: pieces of a few
shared sequences on either strand (equal minimisers at different offsets),
point changes, homopolymer runs, IUPAC codes and '=' bases, sequences
shorter than any k-mer, empty SEQ, missing QUAL, non-zero POS, PNEXT and
TLEN (which -M clears), and, in unplaced.sam.gz only, placed reads around
them. Fixed seeds: the same bytes every time.
"""
import gzip
import random

COMPLEMENT = str.maketrans("ACGTN", "TGCAN")


def records(rnd, n, placed_fraction):
    templates = ["".join(rnd.choice("ACGT") for _ in range(rnd.randint(30, 160)))
                 for _ in range(40)]

    def sequence():
        r = rnd.random()
        if r < 0.05:
            return "*"
        if r < 0.10:
            return "".join(rnd.choice("ACGT") for _ in range(rnd.randint(1, 25)))
        if r < 0.15:
            return (rnd.choice("ACGT") * rnd.randint(1, 60) +
                    "".join(rnd.choice("ACGT") for _ in range(rnd.randint(0, 30))))
        if r < 0.20:
            return "".join(rnd.choice("ACGTNRYKMSWBDHV=") for _ in range(rnd.randint(10, 80)))
        if r < 0.30:
            return "".join(rnd.choice("AACCGGTT") * rnd.randint(1, 4)
                           for _ in range(rnd.randint(5, 30)))
        t = rnd.choice(templates)
        a = rnd.randint(0, len(t) // 3)
        s = t[a:rnd.randint(a + 1, len(t))]
        if rnd.random() < 0.5:
            s = s.translate(COMPLEMENT)[::-1]
        if rnd.random() < 0.2:
            s = list(s)
            s[rnd.randrange(len(s))] = rnd.choice("ACGTN")
            s = "".join(s)
        return s

    for _ in range(n):
        name = "r%d" % rnd.randint(0, n // 2)
        if rnd.random() < placed_fraction:
            s = "".join(rnd.choice("ACGT") for _ in range(50))
            yield [name, str(rnd.choice([0, 16, 99, 147, 83, 163])), rnd.choice(["chr1", "chr2"]),
                   str(rnd.randint(1, 1000)), "60", "50M", "=", str(rnd.randint(1, 1000)), "0",
                   s, "F" * 50, "RG:Z:a"]
            continue
        s = sequence()
        q = ("*" if s == "*" or rnd.random() < 0.1 else
             "".join(rnd.choice("FF:,#") for _ in s))
        yield [name, str(rnd.choice([4, 20, 77, 141, 69, 133, 4 | 0x100])), "*",
               str(rnd.randint(0, 100)) if rnd.random() < 0.2 else "0", "0", "*", "*",
               str(rnd.randint(0, 100)) if rnd.random() < 0.2 else "0",
               str(rnd.randint(-50, 50)) if rnd.random() < 0.2 else "0", s, q, "RG:Z:a"]


def text(seed, n, placed_fraction):
    lines = ["@HD\tVN:1.6\tSO:unsorted", "@SQ\tSN:chr1\tLN:100000", "@SQ\tSN:chr2\tLN:50000",
             "@RG\tID:a\tLB:x"]
    lines += ["\t".join(r) for r in records(random.Random(seed), n, placed_fraction)]
    return "\n".join(lines) + "\n"


with gzip.GzipFile("inputs/unplaced.sam.gz", "wb", mtime=0) as f:
    f.write(text(7, 2000, 0.25).encode())
with open("inputs/all_unplaced.sam", "w") as f:
    f.write(text(8, 400, 0.0))
