#!/bin/sh
# corpus.sh DIR -- the test texts of regression/tokenizer.sh, one document a
# file: English prose, code, numbers, runs of spaces, tabs and newlines, CJK,
# emoji (with joiners and skin tones), combining marks (decomposed and
# composed), invalid UTF-8, and the special tokens' own strings.
set -eu
d=$1
mkdir -p "$d"
printf 'It was the best of times, it was the worst of times; it was the age of wisdom. "Don'"'"'t," she said -- I'"'"'ll go, we'"'"'re late!\n' > "$d/prose.txt"
printf 'int main(void) {\n\tfor (int i = 0; i < 10; i++) printf("%%d\\n", i * 2);\n    return 0;\n}\n\n# def f(x): return x**2 if x else None\n' > "$d/code.txt"
printf '3.14159 1,234,567 0x1F 2026-12-02 12:30 +49 (0)30 1e-9 100%% 007 9999999999\n' > "$d/numbers.txt"
printf '  leading   and\t\ttabs   \n\n\n   trailing    \n\r\nCRLF\r\n        eight\n \n' > "$d/spaces.txt"
printf '日本語のテキストと中文文本，한국어 텍스트。東京タワー。\n' > "$d/cjk.txt"
printf 'emoji 😀🎉 family 👨‍👩‍👧‍👦 thumbs 👍🏽 flags 🇩🇪🇯🇵 keycap 1️⃣ heart ❤️\n' > "$d/emoji.txt"
printf 'cafe\314\201 café nai\314\210ve Zoë e\314\201\314\202 Ångström A\314\212 \341\270\213\314\243\n' > "$d/combining.txt"
printf 'bad \377\376 bytes \300\257 overlong \355\240\200 surrogate \364\220\200\200 past \342\202 cut\n' > "$d/invalid.txt"
printf '<s>Hello</s> <|begin_of_text|>Hi<|end_of_text|> <|endoftext|> <|im_start|>user\n<|im_end|> <bos><eos> <unk> <0x41>\n' > "$d/special.txt"
printf 'Mixed: Hello, 世界! Ça va? Привет мир. مرحبا 123abc ABC123 snake_case camelCase URL https://example.org/a?b=c&d=1\n' > "$d/mixed.txt"
# where the library's Unicode is not PCRE2's (tokfuzz): U+180E is no space to it; letters and digits of Unicode
# 15-16 (CJK Ext. I, Kirat Rai, Nag Mundari, Kaktovik, Garay) are \p{L} and \p{N}
printf ' \341\240\2162 \342\200\202\341\240\216 x\341\240\216y \360\236\223\260\360\236\223\261a x\360\235\213\200\360\235\213\201 \360\220\265\200\360\220\265\201 \360\256\257\260'"'"'s \360\226\265\200'"'"'s x\341\262\211'"'"'s \360\261\215\220'"'"'ll\n' > "$d/unicode_classes.txt"
# the library's normal forms are Unicode 9.0's: a later mark is not reordered, a later character not decomposed
printf '\340\242\230\340\242\231\340\242\232 e\314\201\360\221\274\200\314\201 \340\272\270\340\272\272 \341\267\272\341\267\271 \343\213\277 \352\237\262 \360\220\236\200\n' > "$d/unicode_normal.txt"
# a Hangul syllable before U+11A7 (no trailing consonant): utf8proc's NFC composed the two, dropping it
printf '\354\202\254\341\206\247 \341\204\200\341\205\241\341\206\247\n' > "$d/hangul_tbase.txt"
printf '' > "$d/empty.txt"
printf ' ' > "$d/space.txt"
printf '\n\n' > "$d/newlines.txt"
