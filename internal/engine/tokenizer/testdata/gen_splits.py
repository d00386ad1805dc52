#!/usr/bin/env python3
"""Writes splits.json: random strings and how each BPE pre-tokenizer's regexes
split them, computed with the Python `regex` module (Debian: python3-regex), an
engine independent of the Go code under test.

Like llama.cpp's unicode_regex_split, every regex of a list splits each piece
left by the previous one into matches and the gaps between them, and the regex
runs on a copy of the text whose non-ASCII white space is replaced by \\v
(llama.cpp does that before calling std::regex). The regexes are those of
llama.cpp's llm_tokenizer_bpe; deepseek-llm's letter class is spelled with
code point escapes. Run: python3 gen_splits.py > splits.json
"""
import json
import random
import regex

GPT2 = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)"""
LLAMA3 = r"""(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
QWEN2 = LLAMA3.replace(r"\p{N}{1,3}", r"\p{N}")
CJK = "[\u4e00-\u9fa5\u0800-\u4e00\uac00-\ud7ff]+"
DS_LETTER_RANGES = (
    "0041-005A 0061-007A 00B5 00C0-00D6 00D8-00F6 00F8-01BA 01BC-01BF 01C4-0293 0295-02AF 0370-0373 "
    "0376 0377 037B-037D 037F 0386 0388-038A 038C 038E-03A1 03A3-03F5 03F7-0481 048A-052F 0531-0556 "
    "10A0-10C5 13A0-13F5 13F8-13FD 1C90-1CBA 1CBD-1CBF 1D00-1D2B 1D6B-1D77 1D79-1D9A 1E00-1F15 "
    "1F18-1F1D 1F20-1F45 1F48-1F4D 1F50-1F57 1F59 1F5B 1F5D 1F5F-1F7D 1F80-1FB4 1FB6-1FBC 1FBE "
    "1FC2-1FC4 1FC6-1FCC 1FD0-1FD3 1FD6-1FDB 1FE0-1FEC 1FF2-1FF4 1FF6-1FFC 2102 2107 210A-2113 2115 "
    "2119-211D 2124 2126 2128 212A-212D 212F-2134 2139 213C-213F 2145-2149 214E 2183 2184 2C00-2C7B "
    "2C7E-2CE4 2CEB-2CEE 2CF2 2CF3 A640-A66D A680-A69B A722-A76F A771-A787 A78B-A78E AB70-ABBF "
    "FB00-FB06 FB13-FB17 FF21-FF3A FF41-FF5A 10400-1044F 104B0-104D3 104D8-104FB 10C80-10CB2 "
    "10CC0-10CF2 118A0-118DF 1E900-1E943"
)


def cls(ranges):
    out = ""
    for r in ranges.split():
        a, _, b = r.partition("-")
        out += "\\U%08X" % int(a, 16) + ("-\\U%08X" % int(b, 16) if b else "")
    return out


DS_LETTERS = r"\s?[" + cls(DS_LETTER_RANGES) + "]+"
DS_PUNCT = r"\s?[!-/:-~\uff01-\uff0f\uff1a-\uff5e\u2018-\u201f\u3000-\u3002]+"

PRE = {
    "gpt-2": [GPT2],
    "llama3": [LLAMA3],
    "qwen2": [QWEN2],
    "default": [r"[\p{P}\$\+<=>\^~\|]+", GPT2, r"\p{N}+", "[0-9][0-9][0-9]"],
    "deepseek-coder": ["[\r\n]", r"\s?\p{L}+", r"\s?\p{P}+", CJK, r"\p{N}"],
    "deepseek-llm": ["[\r\n]", DS_LETTERS, DS_PUNCT, r"\s+$", CJK, r"\p{N}+"],
}

POOL = list("aZsStTrReEvVmMlLdD0123456789  \t\n\r'',.!?-$+()~|") + [
    "é", "Ω", "\u2126", "\u1fbe", "я", "我", "가", "😁", "\u00a0", "\u3000", "\u0301",
    "\u0663", "\u200d", "\u2003", "\u0085", "½", "\x00", "\x7f", "！", "’", "。",
]


def split(text, regexes):
    pieces = [text] if text else []
    for pat in regexes:
        new = []
        for p in pieces:
            q = "".join("\v" if ord(c) > 0x7F and c.isspace() else c for c in p)
            pos = 0
            for m in regex.finditer(pat, q):
                if m.start() > pos:
                    new.append(p[pos:m.start()])
                if m.end() > m.start():
                    new.append(p[m.start():m.end()])
                pos = m.end()
            if pos < len(p):
                new.append(p[pos:])
        pieces = new
    return pieces


def main():
    rnd = random.Random(20260101)
    cases = []
    for _ in range(200):
        s = "".join(rnd.choice(POOL) for _ in range(rnd.randint(1, 14)))
        cases.append({"text": s, "splits": {name: split(s, r) for name, r in PRE.items()}})
    print("[")
    print(",\n".join(json.dumps(c, ensure_ascii=True, separators=(",", ":")) for c in cases))
    print("]")


if __name__ == "__main__":
    main()
