"""Token filters of Elasticsearch's analysis, over the `Tok` streams of tokenizers.py.

Stemming is Snowball's, through PyStemmer (C): `stemmer`'s `english`/`porter` is Lucene's
PorterStemFilter algorithm, `porter2`/`snowball` English is Snowball's English; the `light_` and
`minimal_` stemmers of a language use that language's Snowball stemmer (leafsearch has no other).
Removed tokens leave their position increments to the next token, as Lucene's filters do; stacked
tokens (synonyms, `preserve_original`, n-grams of a token) have an increment of 0.
"""

from __future__ import annotations

import threading
import unicodedata
from collections.abc import Callable
from typing import Any

import Stemmer

from leafsearch.index import stopwords
from leafsearch.index.tokenizers import AnalysisConfigError, Tok, flag_param, int_param, ngram_bounds
from leafsearch.unsupported import NotSupported

TokenFilter = Callable[[list[Tok]], list[Tok]]
TermsStep = Callable[[list[str], list[int]], tuple[list[str], list[int]]]


def _on_terms(run: Any, step: TermsStep, case_blind: bool = False) -> Any:
    """Give a filter its form over bare terms and positions (`terms`): an analyzer of the standard
    tokenizer and such filters indexes without building a `Tok` per token (analyzers.py).
    `case_blind`: the filter gives the same result on lowercased terms, so it may come before
    `lowercase` in such a chain."""
    run.terms = step
    run.case_blind = case_blind
    return run


#: Inline synonym rules one filter may hold (a leafsearch limit; Elasticsearch's synonym sets stop
#: at the same number of rules).
MAX_SYNONYM_RULES = 10_000


def lowercase(params: dict[str, Any], name: str) -> TokenFilter:
    def run(toks: list[Tok]) -> list[Tok]:
        for t in toks:
            t.term = t.term.lower()
        return toks

    run.lowercases = True  # type: ignore[attr-defined]
    return _on_terms(run, lambda terms, positions: ([t.lower() for t in terms], positions), True)


def uppercase(params: dict[str, Any], name: str) -> TokenFilter:
    def run(toks: list[Tok]) -> list[Tok]:
        for t in toks:
            t.term = t.term.upper()
        return toks

    return run


def _drop(toks: list[Tok], keep: list[bool]) -> list[Tok]:
    """The tokens kept, each carrying the increments of the dropped ones before it."""
    out = []
    carried = 0
    for t, k in zip(toks, keep, strict=True):
        if k:
            t.inc += carried
            carried = 0
            out.append(t)
        else:
            carried += t.inc
    return out


def word_set(params: dict[str, Any], key: str, default: frozenset[str], name: str) -> frozenset[str]:
    """A `stopwords`-like parameter: a predefined `_name_` list or a list of words."""
    if f"{key}_path" in params:
        raise NotSupported(f"[{key}_path] of [{name}]", "word lists are given inline")
    value = params.get(key)
    if value is None:
        return default
    if isinstance(value, str):
        if value in stopwords.NAMED:
            return stopwords.NAMED[value]
        if value.startswith("_") and value.endswith("_"):
            raise AnalysisConfigError(f"Unknown stopwords set [{value}] for [{name}]")
        return frozenset(v.strip() for v in value.split(","))
    if isinstance(value, list):
        return frozenset(str(v) for v in value)
    raise AnalysisConfigError(f"[{key}] of [{name}] must be a string or a list of strings")


def stop(params: dict[str, Any], name: str) -> TokenFilter:
    words = word_set(params, "stopwords", stopwords.ENGLISH, name)
    ignore_case = flag_param(params, "ignore_case", False)
    if ignore_case:
        words = frozenset(w.lower() for w in words)
    remove_trailing = flag_param(params, "remove_trailing", True)

    def run(toks: list[Tok]) -> list[Tok]:
        keep = [(t.term.lower() if ignore_case else t.term) not in words for t in toks]
        if not remove_trailing and toks:
            keep[-1] = True
        return _drop(toks, keep)

    def on_terms(terms: list[str], positions: list[int]) -> tuple[list[str], list[int]]:
        keep = [(t.lower() if ignore_case else t) not in words for t in terms]
        if not remove_trailing and keep:
            keep[-1] = True
        return [t for t, k in zip(terms, keep, strict=True) if k], [
            p for p, k in zip(positions, keep, strict=True) if k
        ]

    return _on_terms(run, on_terms)


def length(params: dict[str, Any], name: str) -> TokenFilter:
    low = int_param(params, "min", 0, name)
    high = int_param(params, "max", 2**31 - 1, name)
    return lambda toks: _drop(toks, [low <= len(t.term) <= high for t in toks])


def trim(params: dict[str, Any], name: str) -> TokenFilter:
    def run(toks: list[Tok]) -> list[Tok]:
        for t in toks:
            t.term = t.term.strip()
        return toks

    return run


def truncate(params: dict[str, Any], name: str) -> TokenFilter:
    size = int_param(params, "length", 10, name)

    def run(toks: list[Tok]) -> list[Tok]:
        for t in toks:
            t.term = t.term[:size]
        return toks

    return run


def reverse(params: dict[str, Any], name: str) -> TokenFilter:
    def run(toks: list[Tok]) -> list[Tok]:
        for t in toks:
            t.term = t.term[::-1]
        return toks

    return run


def unique(params: dict[str, Any], name: str) -> TokenFilter:
    same_position = flag_param(params, "only_on_same_position", False)

    def run(toks: list[Tok]) -> list[Tok]:
        seen: set[str] = set()
        keep = []
        for t in toks:
            if same_position and t.inc > 0:
                seen = set()
            keep.append(t.term not in seen)
            seen.add(t.term)
        return _drop(toks, keep) if not same_position else [t for t, k in zip(toks, keep, strict=True) if k]

    return run


def apostrophe(params: dict[str, Any], name: str) -> TokenFilter:
    def run(toks: list[Tok]) -> list[Tok]:
        for t in toks:
            cut = t.term.find("'")
            if cut >= 0:
                t.term = t.term[:cut]
        return toks

    return run


_ELISION_DEFAULT = frozenset(
    ["l", "m", "t", "qu", "n", "s", "j", "d", "c", "jusqu", "quoiqu", "lorsqu", "puisqu"]
)


def elision(params: dict[str, Any], name: str) -> TokenFilter:
    articles = word_set(params, "articles", _ELISION_DEFAULT, name)
    ignore_case = flag_param(params, "articles_case", False)
    if ignore_case:
        articles = frozenset(a.lower() for a in articles)

    def elide(term: str) -> str:
        for quote in ("'", "\u2019"):
            cut = term.find(quote)
            if cut > 0:
                head = term[:cut]
                return term[cut + 1 :] if (head.lower() if ignore_case else head) in articles else term
        return term

    def run(toks: list[Tok]) -> list[Tok]:
        for t in toks:
            t.term = elide(t.term)
        return toks

    return _on_terms(run, lambda terms, positions: ([elide(t) for t in terms], positions), ignore_case)


def _strip_possessive(term: str) -> str:
    if len(term) >= 2 and term[-1] in "sS" and term[-2] in "'\u2019\uff07":
        return term[:-2]
    return term


def _possessive(toks: list[Tok]) -> list[Tok]:
    """`english_possessive`: a trailing `'s` (any apostrophe) goes."""
    for t in toks:
        t.term = _strip_possessive(t.term)
    return toks


possessive_english = _on_terms(
    _possessive, lambda terms, positions: ([_strip_possessive(t) for t in terms], positions), True
)


_FOLD_EXTRA = str.maketrans(
    {"ß": "ss", "æ": "ae", "Æ": "AE", "ø": "o", "Ø": "O", "œ": "oe", "Œ": "OE", "đ": "d", "Đ": "D",
     "ł": "l", "Ł": "L", "þ": "th", "Þ": "TH", "ð": "d", "Ð": "D", "ı": "i", "ĸ": "q", "ŉ": "'n"}
)  # fmt: skip


def fold(term: str) -> str:
    """ASCII folding: accents off, ligatures and a few letters spelled out in ASCII."""
    if term.isascii():
        return term
    decomposed = unicodedata.normalize("NFKD", term.translate(_FOLD_EXTRA))
    return "".join(c for c in decomposed if not unicodedata.combining(c))


def asciifolding(params: dict[str, Any], name: str) -> TokenFilter:
    preserve = flag_param(params, "preserve_original", False)

    def run(toks: list[Tok]) -> list[Tok]:
        out = []
        for t in toks:
            folded = fold(t.term)
            if preserve and folded != t.term:
                out.append(Tok(folded, t.start, t.end, t.type, t.inc, t.length, t.keyword))
                t.inc = 0
            else:
                t.term = folded
            out.append(t)
        return out

    if preserve:
        return run
    return _on_terms(run, lambda terms, positions: ([fold(t) for t in terms], positions))


# ---- stemming ---------------------------------------------------------------------------------

# Elasticsearch's `stemmer` names -> Snowball algorithms (PyStemmer's names); `None`: no stemming
# but the English possessive.
_STEMMER_NAMES: dict[str, str] = {
    "english": "porter", "porter": "porter", "porter2": "english", "light_english": "porter",
    "minimal_english": "porter", "lovins": "porter", "arabic": "arabic", "armenian": "armenian",
    "basque": "basque", "catalan": "catalan", "danish": "danish", "dutch": "dutch",
    "dutch_kp": "dutch_porter", "finnish": "finnish", "light_finnish": "finnish", "french": "french",
    "light_french": "french", "minimal_french": "french", "german": "german", "german2": "german",
    "light_german": "german", "minimal_german": "german", "greek": "greek", "hindi": "hindi",
    "hungarian": "hungarian", "light_hungarian": "hungarian", "indonesian": "indonesian",
    "irish": "irish", "italian": "italian", "light_italian": "italian", "lithuanian": "lithuanian",
    "norwegian": "norwegian", "light_norwegian": "norwegian", "minimal_norwegian": "norwegian",
    "portuguese": "portuguese", "light_portuguese": "portuguese", "minimal_portuguese": "portuguese",
    "portuguese_rslp": "portuguese", "romanian": "romanian", "russian": "russian",
    "light_russian": "russian", "serbian": "serbian", "spanish": "spanish", "light_spanish": "spanish",
    "swedish": "swedish", "light_swedish": "swedish", "turkish": "turkish", "estonian": "estonian",
}  # fmt: skip
# Snowball filter `language` values (Lucene's class names) -> algorithms.
_SNOWBALL_NAMES = {
    "English": "english", "Porter": "porter", "Lovins": "porter", "Kp": "dutch_porter",
    "German2": "german", **{n.capitalize(): n for n in (
        "arabic", "armenian", "basque", "catalan", "danish", "dutch", "estonian", "finnish", "french",
        "german", "hungarian", "irish", "italian", "lithuanian", "norwegian", "portuguese", "romanian",
        "russian", "serbian", "spanish", "swedish", "turkish",
    )},
}  # fmt: skip


def stemming(algorithm: str) -> TokenFilter:
    local = threading.local()  # a PyStemmer object is not to be shared between threads

    def stem(words: list[str]) -> list[str]:
        stemmer = getattr(local, "stemmer", None)
        if stemmer is None:
            stemmer = local.stemmer = Stemmer.Stemmer(algorithm)
        return stemmer.stemWords(words)

    def run(toks: list[Tok]) -> list[Tok]:
        todo = [t for t in toks if not t.keyword]
        for t, stemmed in zip(todo, stem([t.term for t in todo]), strict=True):
            t.term = stemmed
        return toks

    return _on_terms(run, lambda terms, positions: (stem(terms), positions))


def stemmer(params: dict[str, Any], name: str) -> TokenFilter:
    language = params.get("language", params.get("name", "english"))
    if language == "possessive_english":
        return possessive_english
    algorithm = _STEMMER_NAMES.get(str(language))
    if algorithm is None or algorithm not in Stemmer.algorithms():
        raise AnalysisConfigError(f"Unknown stemmer language [{language}] for [{name}]")
    return stemming(algorithm)


def snowball(params: dict[str, Any], name: str) -> TokenFilter:
    language = str(params.get("language", "English"))
    algorithm = _SNOWBALL_NAMES.get(language)
    if algorithm is None or algorithm not in Stemmer.algorithms():
        raise AnalysisConfigError(f"Unknown snowball language [{language}] for [{name}]")
    return stemming(algorithm)


def porter_stem(params: dict[str, Any], name: str) -> TokenFilter:
    return stemming("porter")


def keyword_marker(params: dict[str, Any], name: str) -> TokenFilter:
    words = word_set(params, "keywords", frozenset(), name)
    ignore_case = flag_param(params, "ignore_case", False)
    if ignore_case:
        words = frozenset(w.lower() for w in words)

    def run(toks: list[Tok]) -> list[Tok]:
        for t in toks:
            if (t.term.lower() if ignore_case else t.term) in words:
                t.keyword = True
        return toks

    return run


# ---- n-grams and shingles ---------------------------------------------------------------------


def ngram(params: dict[str, Any], name: str, max_diff: int, edge: bool = False) -> TokenFilter:
    low, high = ngram_bounds(params, name, 2 if not edge else 1)
    if not edge and high - low > max_diff:
        raise AnalysisConfigError(
            f"The difference between max_gram and min_gram in NGram Tokenizer must be less than or equal "
            f"to: [{max_diff}] but was [{high - low}]. This limit can be set by changing the "
            "[index.max_ngram_diff] index level setting."
        )
    preserve = flag_param(params, "preserve_original", False)

    def run(toks: list[Tok]) -> list[Tok]:
        out = []
        carried = 0  # the increments of tokens that made no gram go to the next gram
        for t in toks:
            size = len(t.term)
            starts = range(1) if edge else range(size)
            grams = [t.term[i : i + n] for i in starts for n in range(low, min(high, size - i) + 1)]
            if preserve and (size < low or size > high):
                grams.append(t.term)
            carried += t.inc
            for gram in grams:
                out.append(Tok(gram, t.start, t.end, t.type, carried, 1, t.keyword))
                carried = 0
        return out

    return run


def shingle(params: dict[str, Any], name: str, max_diff: int) -> TokenFilter:
    low = int_param(params, "min_shingle_size", 2, name)
    high = int_param(params, "max_shingle_size", 2, name)
    unigrams = flag_param(params, "output_unigrams", True)
    unigrams_if_none = flag_param(params, "output_unigrams_if_no_shingles", False)
    separator = str(params.get("token_separator", " "))
    if low < 2:
        raise AnalysisConfigError("Min shingle size must be >= 2")
    if high < low:
        raise AnalysisConfigError("Max shingle size must be >= min shingle size")
    diff = high - low + (1 if unigrams else 0)
    if diff > max_diff:
        raise AnalysisConfigError(
            "In Shingle TokenFilter the difference between max_shingle_size and min_shingle_size (and +1 if "
            f"outputting unigrams) must be less than or equal to: [{max_diff}] but was [{diff}]. This limit "
            "can be set by changing the [index.max_shingle_diff] index level setting."
        )

    def run(toks: list[Tok]) -> list[Tok]:
        out = []
        for i, t in enumerate(toks):
            carried = t.inc
            if unigrams:
                out.append(t)
                carried = 0
            for n in range(low, high + 1):
                if i + n > len(toks):
                    break
                words = toks[i : i + n]
                out.append(
                    Tok(separator.join(w.term for w in words), t.start, words[-1].end, "shingle", carried, n)
                )
                carried = 0
        if not out and unigrams_if_none:
            return toks
        return out

    return run


# ---- synonyms ---------------------------------------------------------------------------------


def parse_synonyms(
    params: dict[str, Any], name: str, analyze: Callable[[str], list[str]]
) -> dict[tuple[str, ...], list[tuple[str, ...]]]:
    """Solr-format rules (`a, b, c` or `a, b => c`), each side analysed by the chain before the
    filter: matched phrase -> the phrases that replace it."""
    rules = params.get("synonyms")
    if rules is None:
        if "synonyms_path" in params or "synonyms_set" in params:
            raise NotSupported(f"[synonyms_path] and [synonyms_set] of [{name}]", "synonyms are given inline")
        raise AnalysisConfigError("synonym requires either `synonyms` or `synonyms_path` to be configured")
    if isinstance(rules, str):
        rules = [rules]
    if not isinstance(rules, list):
        raise AnalysisConfigError(f"[synonyms] of [{name}] must be a list of rules")
    if len(rules) > MAX_SYNONYM_RULES:
        raise AnalysisConfigError(
            f"synonym filter [{name}] has [{len(rules)}] rules, more than the [{MAX_SYNONYM_RULES}] allowed"
        )
    expand = flag_param(params, "expand", True)
    lenient = flag_param(params, "lenient", False)
    table: dict[tuple[str, ...], list[tuple[str, ...]]] = {}

    def phrases(side: str) -> list[tuple[str, ...]]:
        out = []
        for part in side.split(","):
            part = part.strip()
            if part:
                terms = tuple(analyze(part))
                if not terms:
                    if lenient:
                        continue
                    raise AnalysisConfigError(
                        f"failed to build synonyms: term: {part} was completely eliminated by analyzer"
                    )
                out.append(terms)
        return out

    for rule in rules:
        rule = str(rule).strip()
        if not rule or rule.startswith("#"):
            continue
        if "=>" in rule:
            left, _, right = rule.partition("=>")
            if "=>" in right:
                raise AnalysisConfigError(f"Invalid synonym rule [{rule}]: more than one explicit mapping")
            targets = phrases(right)
            for source in phrases(left):
                table.setdefault(source, [])
                table[source].extend(t for t in targets if t not in table[source])
        else:
            group = phrases(rule)
            for source in group:
                targets = group if expand else group[:1]
                table.setdefault(source, [])
                table[source].extend(t for t in targets if t not in table[source])
    return table


def synonym_filter(table: dict[tuple[str, ...], list[tuple[str, ...]]]) -> TokenFilter:
    longest = max(map(len, table), default=0)

    def run(toks: list[Tok]) -> list[Tok]:
        out: list[Tok] = []
        i = 0
        while i < len(toks):
            for n in range(min(longest, len(toks) - i), 0, -1):
                key = tuple(t.term for t in toks[i : i + n])
                targets = table.get(key)
                if targets is not None:
                    break
            else:
                out.append(toks[i])
                i += 1
                continue
            matched = toks[i : i + n]
            first, last = matched[0], matched[-1]
            inc = first.inc
            for target in sorted(targets, key=lambda target: target != key):  # the original first
                if target == key:
                    widest = max(map(len, targets))
                    for j, t in enumerate(matched):
                        t.inc = inc if j == 0 else t.inc
                        if n == 1:  # one token beside longer alternatives spans them (a graph)
                            t.length = widest
                        out.append(t)
                else:
                    for j, term in enumerate(target):
                        span = n if len(target) == 1 else 1
                        source = matched[min(j, n - 1)]
                        start = first.start if len(target) == 1 else source.start
                        end = last.end if len(target) == 1 else source.end
                        out.append(Tok(term, start, end, "SYNONYM", inc if j == 0 else 1, span))
                inc = 0
            i += n
        return out

    return run


# ---- word_delimiter_graph ---------------------------------------------------------------------


def _kind(c: str) -> int:
    if c.isdigit():
        return 3
    if c.isupper():
        return 1
    if c.isalpha():
        return 2
    return 0


def word_delimiter(params: dict[str, Any], name: str) -> TokenFilter:
    words = flag_param(params, "generate_word_parts", True)
    numbers = flag_param(params, "generate_number_parts", True)
    cat_words = flag_param(params, "catenate_words", False)
    cat_numbers = flag_param(params, "catenate_numbers", False)
    cat_all = flag_param(params, "catenate_all", False)
    preserve = flag_param(params, "preserve_original", False)
    case_change = flag_param(params, "split_on_case_change", True)
    numerics = flag_param(params, "split_on_numerics", True)
    possessive = flag_param(params, "stem_english_possessive", True)
    protected = word_set(params, "protected_words", frozenset(), name)

    def parts(term: str) -> list[tuple[int, int, bool]]:
        """(start, end, is_number) of each sub-word."""
        found = []
        start = None
        for i, c in enumerate(term):
            kind = _kind(c)
            if kind == 0:
                if start is not None:
                    found.append((start, i))
                    start = None
                continue
            if start is not None:
                prev = _kind(term[i - 1])
                if (case_change and prev == 2 and kind == 1) or (numerics and (prev == 3) != (kind == 3)):
                    found.append((start, i))
                    start = i
                elif (
                    case_change and prev == 1 and kind == 1 and i + 1 < len(term) and _kind(term[i + 1]) == 2
                ):
                    found.append((start, i))  # "PowerSHOTGun": SHOT + Gun
                    start = i
            else:
                start = i
        if start is not None:
            found.append((start, len(term)))
        if possessive and len(found) >= 2:  # a sub-word's `'s` goes ("Neil's-Super": Neil, Super)
            found = [
                (s, e) for s, e in found if not (term[s:e] in ("s", "S") and s >= 1 and term[s - 1] == "'")
            ]
        return [(s, e, term[s].isdigit()) for s, e in found]

    def run(toks: list[Tok]) -> list[Tok]:
        out: list[Tok] = []
        carried = 0
        for t in toks:
            pieces = [] if t.term in protected else parts(t.term)
            if t.term in protected or (len(pieces) == 1 and pieces[0][:2] == (0, len(t.term))):
                t.inc += carried
                carried = 0
                out.append(t)
                continue
            exact = len(t.term) == t.end - t.start  # offsets of the parts only where they are exact

            def tok(
                s: int, e: int, span: int, text: str | None = None, t: Tok = t, exact: bool = exact
            ) -> Tok:
                start, end = (t.start + s, t.start + e) if exact else (t.start, t.end)
                return Tok(text if text is not None else t.term[s:e], start, end, t.type, 1, span)

            # (position among the parts, -span, token): Lucene's order, longest first at a position
            slots: list[tuple[int, int, Tok]] = []
            if preserve:
                slots.append((0, -len(pieces), Tok(t.term, t.start, t.end, t.type, 1, max(len(pieces), 1))))
            for number, flag in ((False, cat_words), (True, cat_numbers)):
                if flag:
                    i = 0
                    while i < len(pieces):
                        j = i
                        while j < len(pieces) and pieces[j][2] == number:
                            j += 1
                        if j - i > 1:
                            text = "".join(t.term[s:e] for s, e, _ in pieces[i:j])
                            if not (preserve and text == t.term):  # the original already stands for it
                                slots.append((i, i - j, tok(pieces[i][0], pieces[j - 1][1], j - i, text)))
                        i = max(j, i + 1)
            if cat_all and len(pieces) > 1:
                text = "".join(t.term[s:e] for s, e, _ in pieces)
                slots.append((0, -len(pieces), tok(pieces[0][0], pieces[-1][1], len(pieces), text)))
            for i, (s, e, number) in enumerate(pieces):
                if numbers if number else words:
                    slots.append((i, -1, tok(s, e, 1)))
            slots.sort(key=lambda slot: (slot[0], slot[1]))
            last = None
            for position, _, x in slots:
                x.inc = t.inc + carried + position if last is None else position - last
                last = position
                out.append(x)
            carried = 0 if slots else carried + t.inc
        return out

    return run


#: Filter types by name: a builder of (settings, component name) -> filter.
FILTERS: dict[str, Callable[[dict[str, Any], str], TokenFilter]] = {
    "lowercase": lowercase,
    "uppercase": uppercase,
    "stop": stop,
    "length": length,
    "trim": trim,
    "truncate": truncate,
    "reverse": reverse,
    "unique": unique,
    "apostrophe": apostrophe,
    "elision": elision,
    "asciifolding": asciifolding,
    "stemmer": stemmer,
    "snowball": snowball,
    "porter_stem": porter_stem,
    "porterStem": porter_stem,
    "keyword_marker": keyword_marker,
    "word_delimiter": word_delimiter,
    "word_delimiter_graph": word_delimiter,
}
#: Those whose builder takes an index-level limit (`index.max_ngram_diff`, `index.max_shingle_diff`).
NGRAM_FILTERS = {"ngram", "nGram", "edge_ngram", "edgeNGram"}
SHINGLE_FILTERS = {"shingle"}
#: Those whose rules are analysed by the chain before them.
SYNONYM_FILTERS = {"synonym", "synonym_graph"}
