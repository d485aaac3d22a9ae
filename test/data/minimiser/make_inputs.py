#!/usr/bin/env python3
"""Writes the inputs of the minimiser-order golden files (README.md).

    python3 make_inputs.py   # inputs/unplaced.sam.gz, all_unplaced.sam, edge.sam.gz

Unplaced reads (RNAME '*') that stress samtools sort -M: pieces of a few
shared sequences on either strand (equal minimisers at different offsets),
point changes, homopolymer runs, IUPAC codes and '=' bases, sequences
shorter than any k-mer, empty SEQ, missing QUAL, non-zero POS, PNEXT and
TLEN (which -M clears), and, in unplaced.sam.gz only, placed reads around
them. edge.sam.gz plants, for each k of the modes, the k-mer of hash 0 (the
smallest) at offsets around samtools' clamp of 65535, and k-mers of the
largest hashes, whose hash + 2^30 wraps at 2^62. Fixed seeds: the same bytes
every time.
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


HASH_XOR = 0xdead7878beef7878


def kmer_of_hash(hash_value, k):
    """The k-mer (A C G T = 0 1 2 3, first base most significant) whose
    hash, its value XOR HASH_XOR masked to 2k bits, is hash_value."""
    mask = (1 << (2 * k)) - 1
    value = (hash_value ^ HASH_XOR) & mask
    return "".join("ACGT"[(value >> (2 * (k - 1 - i))) & 3] for i in range(k))


def edge_records(rnd):
    out = []

    def add(name, seq, flag=4, qual="*"):
        out.append([name, str(flag), "*", "0", "0", "*", "*", "0", "0", seq or "*", qual])

    for k in (1, 5, 20, 31):
        mask = (1 << (2 * k)) - 1
        zero = kmer_of_hash(0, k)
        add("k%d_zero" % k, zero)
        for top in range(4):
            add("k%d_top%d" % (k, top), kmer_of_hash(mask - top, k), rnd.choice([4, 20]))
        # The hash-0 k-mer after a T run (squashed to one base with -H), at
        # offsets below, at and past 65535: past it samtools' ranks tie.
        for offset in (10, 65530, 65535, 65536, 65540, 70000):
            seq = "T" * offset + zero + "G" * rnd.randint(0, 3)
            add("k%d_at%d" % (k, offset), seq, rnd.choice([4, 20]))
            add("k%d_at%d_q" % (k, offset), seq, rnd.choice([4, 20]), "F" * len(seq))
    rnd.shuffle(out)
    return out


def text(seed, n, placed_fraction):
    lines = ["@HD\tVN:1.6\tSO:unsorted", "@SQ\tSN:chr1\tLN:100000", "@SQ\tSN:chr2\tLN:50000",
             "@RG\tID:a\tLB:x"]
    lines += ["\t".join(r) for r in records(random.Random(seed), n, placed_fraction)]
    return "\n".join(lines) + "\n"


with gzip.GzipFile("inputs/unplaced.sam.gz", "wb", mtime=0) as f:
    f.write(text(7, 2000, 0.25).encode())
with open("inputs/all_unplaced.sam", "w") as f:
    f.write(text(8, 400, 0.0))
with gzip.GzipFile("inputs/edge.sam.gz", "wb", mtime=0) as f:
    lines = ["@HD\tVN:1.6\tSO:unsorted", "@SQ\tSN:chr1\tLN:100000"]
    lines += ["\t".join(r) for r in edge_records(random.Random(9))]
    f.write(("\n".join(lines) + "\n").encode())
