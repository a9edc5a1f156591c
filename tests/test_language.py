"""Seeded language detection of contexts and questions (LURCH inclusion criteria)."""

from langdetect import DetectorFactory, detect

from ctxbench.features.language import detect_language, language_columns, language_matches

EN = ("The committee met on Tuesday to discuss the new budget for the public library. Most members agreed that "
      "the opening hours should be extended during the winter months. ")
DE = ("Der Ausschuss traf sich am Dienstag, um den neuen Haushalt der öffentlichen Bibliothek zu besprechen. Die "
      "meisten Mitglieder waren sich einig, dass die Öffnungszeiten im Winter verlängert werden sollten. ")


def test_detects_languages():
    assert detect_language(EN * 3) == "en"
    assert detect_language(DE) == "de"
    assert detect_language("天地玄黃，宇宙洪荒。日月盈昃，辰宿列張。寒來暑往，秋收冬藏。").startswith("zh")
    assert detect_language("") is None
    assert detect_language("12345 678 90") is None  # no letters: nothing to detect
    assert language_columns({"context": EN * 4, "question": "Wie viele Mitglieder waren sich einig?"}) == {
        "language": "en", "question_language": "de"}


def test_long_context_sampled_across_its_length():
    # 12,000+ characters of English, then 40,000+ of German: langdetect alone reads the first 10,000 characters
    # (all English); five evenly spaced windows see one English and four German slices
    text = EN * (12000 // len(EN) + 1) + DE * (40000 // len(DE) + 1)
    DetectorFactory.seed = 0
    assert detect(text) == "en"
    assert detect_language(text) == "de"
    assert detect_language(text) == detect_language(text)  # seeded: the same code every time


def test_language_matches():
    assert language_matches("zh-tw", "zh") and language_matches("zh-cn", "ZH-CN") and language_matches("en", "en")
    assert not language_matches("en", "zh") and not language_matches(None, "en")
