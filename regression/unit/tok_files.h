/* tok_files.h -- small tokenizers written in Hugging Face's formats for the
 * unit tests (test_tok_alloc, test_sample_stream), each into a folder:
 * write_gpt2: GPT-2's vocab.json and merges.txt; write_bytelevel:
 * bytelevel.json (NFC, a Split regex then ByteLevel, a template, an added
 * token <|endoftext|>); write_llama: llama.json, Llama 2-like (Prepend and
 * Replace, BPE with byte fallback, the decoders Replace, ByteFallback, Fuse
 * and Strip).  Their vocabularies are small: the 256 bytes, the words
 * "hello" and "world", a few special tokens. */
#ifndef TRIAD_TOK_FILES_H
#define TRIAD_TOK_FILES_H

#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "tap.h"

/* GPT-2's byte-to-character map (its bytes_to_unicode): the printable
 * bytes stand for themselves, the others for 256, 257, ... in order. */
static void byte_char(int b, char out[3])
{
    int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    int cp = b;
    if (!printable) {
        int n = 0;
        for (int c = 0; c < b; c++) n += !((c >= '!' && c <= '~') || (c >= 0xA1 && c <= 0xAC) || (c >= 0xAE && c <= 0xFF));
        cp = 256 + n;
    }
    if (cp < 0x80) out[0] = (char)cp, out[1] = 0;
    else out[0] = (char)(0xC0 | cp >> 6), out[1] = (char)(0x80 | (cp & 0x3F)), out[2] = 0;
}

/* A JSON string's body for s (the tokens here need only '"' and '\\' escaped). */
static void json_str(FILE *f, const char *s)
{
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') fputc('\\', f);
        fputc(*s, f);
    }
}

/* The byte-level merges (left, right) over "hello world" ("Ġ" = U+0120, a space). */
static const char *const bl_merges[][2] = {{"h", "e"},       {"l", "l"},   {"he", "ll"},   {"hell", "o"},
                                           {"\xC4\xA0", "w"}, {"o", "r"},   {"\xC4\xA0w", "or"}, {"\xC4\xA0wor", "l"},
                                           {"\xC4\xA0worl", "d"}};
#define BL_MERGES (int)(sizeof bl_merges / sizeof bl_merges[0])

/* The byte-level vocabulary: the 256 byte characters (ids 0-255), the
 * merges' results (256 on), <|endoftext|> last; as a JSON object's members. */
static int bl_vocab(FILE *f)
{
    int id = 0;
    for (int b = 0; b < 256; b++) {
        char c[3];
        byte_char(b, c);
        fprintf(f, "%s\"", id ? ", " : "");
        json_str(f, c);
        fprintf(f, "\": %d", id++);
    }
    for (int i = 0; i < BL_MERGES; i++) {
        fprintf(f, ", \"");
        json_str(f, bl_merges[i][0]);
        json_str(f, bl_merges[i][1]);
        fprintf(f, "\": %d", id++);
    }
    fprintf(f, ", \"<|endoftext|>\": %d", id);
    return id;
}

static FILE *open_in(const char *dir, const char *name)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return fopen(path, "w");
}

/* dir/gpt2/vocab.json and merges.txt. */
static int write_gpt2(const char *dir)
{
    FILE *v = open_in(dir, "vocab.json"), *m = open_in(dir, "merges.txt");
    if (!v || !m) return -1;
    fprintf(v, "{");
    bl_vocab(v);
    fprintf(v, "}\n");
    fprintf(m, "#version: 0.2\n");
    for (int i = 0; i < BL_MERGES; i++) fprintf(m, "%s %s\n", bl_merges[i][0], bl_merges[i][1]);
    return (fclose(v) | fclose(m)) ? -1 : 0;
}

/* dir/bytelevel.json: NFC, a Split regex then ByteLevel, a template with
 * <|endoftext|> first. */
static int write_bytelevel(const char *dir)
{
    FILE *f = open_in(dir, "bytelevel.json");
    if (!f) return -1;
    fprintf(f, "{\"version\": \"1.0\", \"truncation\": null, \"padding\": null,\n \"added_tokens\": [");
    fprintf(f, "{\"id\": %d, \"content\": \"<|endoftext|>\", \"single_word\": false, \"lstrip\": false, \"rstrip\": false, "
               "\"normalized\": false, \"special\": true}],\n", 256 + BL_MERGES);
    fprintf(f, " \"normalizer\": {\"type\": \"NFC\"},\n");
    fprintf(f, " \"pre_tokenizer\": {\"type\": \"Sequence\", \"pretokenizers\": ["
               "{\"type\": \"Split\", \"pattern\": {\"Regex\": \"(?i:'s|'t)|\\\\p{L}+|\\\\p{N}{1,3}| ?[^\\\\s\\\\p{L}\\\\p{N}]+|\\\\s+\"}, "
               "\"behavior\": \"Isolated\", \"invert\": false}, "
               "{\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"trim_offsets\": true, \"use_regex\": false}]},\n");
    fprintf(f, " \"post_processor\": {\"type\": \"TemplateProcessing\", \"single\": [{\"SpecialToken\": {\"id\": "
               "\"<|endoftext|>\", \"type_id\": 0}}, {\"Sequence\": {\"id\": \"A\", \"type_id\": 0}}], \"pair\": [], "
               "\"special_tokens\": {\"<|endoftext|>\": {\"id\": \"<|endoftext|>\", \"ids\": [%d], \"tokens\": "
               "[\"<|endoftext|>\"]}}},\n", 256 + BL_MERGES);
    fprintf(f, " \"decoder\": {\"type\": \"ByteLevel\", \"add_prefix_space\": true, \"trim_offsets\": true, "
               "\"use_regex\": true},\n");
    fprintf(f, " \"model\": {\"type\": \"BPE\", \"dropout\": null, \"unk_token\": null, \"continuing_subword_prefix\": null, "
               "\"end_of_word_suffix\": null, \"fuse_unk\": false, \"byte_fallback\": false, \"ignore_merges\": false,\n"
               "  \"vocab\": {");
    bl_vocab(f);
    fprintf(f, "},\n  \"merges\": [");
    for (int i = 0; i < BL_MERGES; i++) {
        fprintf(f, "%s[\"", i ? ", " : "");
        json_str(f, bl_merges[i][0]);
        fprintf(f, "\", \"");
        json_str(f, bl_merges[i][1]);
        fprintf(f, "\"]");
    }
    fprintf(f, "]}}\n");
    return fclose(f) ? -1 : 0;
}

/* dir/llama.json: sentencepiece-style BPE ("▁" = U+2581 for a space) with
 * byte fallback; <unk> 0, <s> 1, </s> 2, <0x00>..<0xFF> 3-258, then the
 * letters and the merges' results. */
#define SP "\xE2\x96\x81"
static const char *const sp_merges[][2] = {{SP, "h"}, {"e", "l"}, {SP "h", "el"}, {"l", "o"}, {SP "hel", "lo"},
                                           {SP, "w"}, {"o", "r"}, {SP "w", "or"}, {"l", "d"}, {SP "wor", "ld"}};
#define SP_MERGES (int)(sizeof sp_merges / sizeof sp_merges[0])
static int write_llama(const char *dir)
{
    FILE *f = open_in(dir, "llama.json");
    if (!f) return -1;
    static const char *const names[] = {"<unk>", "<s>", "</s>"};
    fprintf(f, "{\"version\": \"1.0\", \"truncation\": null, \"padding\": null,\n \"added_tokens\": [");
    for (int i = 0; i < 3; i++)
        fprintf(f, "%s{\"id\": %d, \"content\": \"%s\", \"single_word\": false, \"lstrip\": false, \"rstrip\": false, "
                   "\"normalized\": false, \"special\": true}", i ? ", " : "", i, names[i]);
    fprintf(f, "],\n \"normalizer\": {\"type\": \"Sequence\", \"normalizers\": [{\"type\": \"Prepend\", \"prepend\": \"" SP
               "\"}, {\"type\": \"Replace\", \"pattern\": {\"String\": \" \"}, \"content\": \"" SP "\"}]},\n");
    fprintf(f, " \"pre_tokenizer\": null,\n");
    fprintf(f, " \"post_processor\": {\"type\": \"TemplateProcessing\", \"single\": [{\"SpecialToken\": {\"id\": \"<s>\", "
               "\"type_id\": 0}}, {\"Sequence\": {\"id\": \"A\", \"type_id\": 0}}], \"pair\": [], \"special_tokens\": "
               "{\"<s>\": {\"id\": \"<s>\", \"ids\": [1], \"tokens\": [\"<s>\"]}}},\n");
    fprintf(f, " \"decoder\": {\"type\": \"Sequence\", \"decoders\": [{\"type\": \"Replace\", \"pattern\": {\"String\": \"" SP
               "\"}, \"content\": \" \"}, {\"type\": \"ByteFallback\"}, {\"type\": \"Fuse\"}, {\"type\": \"Strip\", "
               "\"content\": \" \", \"start\": 1, \"stop\": 0}]},\n");
    fprintf(f, " \"model\": {\"type\": \"BPE\", \"dropout\": null, \"unk_token\": \"<unk>\", \"continuing_subword_prefix\": "
               "null, \"end_of_word_suffix\": null, \"fuse_unk\": true, \"byte_fallback\": true, \"ignore_merges\": false,\n"
               "  \"vocab\": {\"<unk>\": 0, \"<s>\": 1, \"</s>\": 2");
    int id = 3;
    for (int b = 0; b < 256; b++) fprintf(f, ", \"<0x%02X>\": %d", b, id++);
    static const char *const letters[] = {SP, "h", "e", "l", "o", "w", "r", "d"};
    for (int i = 0; i < 8; i++) fprintf(f, ", \"%s\": %d", letters[i], id++);
    for (int i = 0; i < SP_MERGES; i++) fprintf(f, ", \"%s%s\": %d", sp_merges[i][0], sp_merges[i][1], id++);
    fprintf(f, "},\n  \"merges\": [");
    for (int i = 0; i < SP_MERGES; i++) fprintf(f, "%s\"%s %s\"", i ? ", " : "", sp_merges[i][0], sp_merges[i][1]);
    fprintf(f, "]}}\n");
    return fclose(f) ? -1 : 0;
}

/* A new scratch folder in dir (tap_tmp_template's, for name) with the
 * three written into it, GPT-2's files into its folder gpt2: 0, or -1 after
 * a tap line saying why (skipped without a scratch folder, failed where
 * the files cannot be written).  tok_files_remove removes it. */
static int tok_files_write_all(char *dir, size_t len, const char *name)
{
    tap_tmp_template(dir, len, name);
    if (!mkdtemp(dir)) {
        tap_skip("no scratch directory");
        return -1;
    }
    char gpt2[4200];
    snprintf(gpt2, sizeof gpt2, "%s/gpt2", dir);
    if (mkdir(gpt2, 0700) || write_gpt2(gpt2) || write_bytelevel(dir) || write_llama(dir)) {
        tap_ok(0, "the tokenizers written to %s", dir);
        return -1;
    }
    return 0;
}

static void tok_files_remove(const char *dir)
{
    char cmd[4300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) tap_diag("could not remove %s", dir);
}

#endif
