"""What a user's sentence is, for extraction without a model: a durable fact, or talk.

Pure rules over one sentence at a time, in English with the common forms of Chinese,
Japanese, Korean and French:

- :func:`strip_lead_in` removes ``remember:``, ``note:``, ``please remember that``, ``FYI``.
- :func:`talk_kind` says why a sentence is not a memory: a question, a request for the task at
  hand, thanks, something temporary, or chatter (guesses, status, pasted output). A request
  that states a general rule (``always``, ``never``, ``instead of``) is a rule, not a request.
- :func:`memory_type` picks the type as Qwen 0.24 defines them: ``reference`` points to an
  outside system (a URL, a channel, a dashboard, a tracker); ``user`` is about the person (role,
  knowledge, preferences); ``feedback`` is how to work (rules, corrections) and why; ``project``
  is a fact about this project (we/our, dates, versions, schedules, names in code).
- :func:`split_reason` separates a rule from its reason (``…, because …``) for the ``Why:``.
"""

from __future__ import annotations

import re
from functools import cache
from typing import Literal

from qmem_git.core.model import MemoryType

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

TalkKind = Literal["question", "request", "thanks", "temporary", "chatter"]


def _lazy(pattern: str, flags: int = 0) -> Callable[[], re.Pattern[str]]:
    """``pattern``, compiled on its first use: ``remember`` types one fact with 8 of this
    module's 20 patterns, and compiling all of them took ~13 ms of its start."""
    return cache(lambda: re.compile(pattern, flags))


_I = re.IGNORECASE

_LEAD_IN = _lazy(
    r"^(?:(?:please\s+)?(?:remember|note|save|keep\s+in\s+mind)(?:\s+that\b|\s*:)"
    r"|(?:please\s+)?(?:remember|note)\s+(?=this\s*:)|this\s*:"
    r"|fyi\b[:,]?|for\s+the\s+record\b[:,]?|important\s*:|n\.?b\.?\s*:"
    r"|(?:rappel|note|remarque)\s*:|记住[:：，,]?|注意[:：]|メモ[:：]|참고[:：])\s*",
    _I,
)

_BARE_LEAD_IN = _lazy(r"^(?:please\s+)?(?:remember|save|note)\s+(?!to\b)", _I)

# Temporary: the spec's list (core.patches) plus the phrases people use for the same thing.
_TEMPORARY = _lazy(
    r"\b(?:today|tonight|now|currently|for\s+now|right\s+now|at\s+the\s+moment"
    r"|for\s+the\s+moment|for\s+this\s+task|this\s+session|in\s+this\s+session|this\s+time"
    r"|temporary|temporarily|for\s+a\s+while|later\s+today|this\s+afternoon|this\s+morning"
    r"|aujourd'hui|maintenant|pour\s+l'instant|pour\s+le\s+moment|en\s+ce\s+moment"
    r"|temporairement)\b"
    r"|今天|现在|暂时|目前|今日|今は|いまは|一時的|とりあえず|오늘|지금|당분간|일단",
    _I,
)

_QUESTION_START = _lazy(
    r"^(?:what|what's|why|how|where|who|whom|which|whose|is|are|was|were|does|did|can|could"
    r"|would|will|shall|may|might|have|has|had|isn't|aren't|doesn't|didn't|wasn't|weren't"
    r"|do\s+(?:we|you|i|they|the|these|those|this|that|it)"
    r"|pourquoi|comment|combien|quel|quelle|quels|quelles|où|est-ce|qu'est-ce|peux-tu"
    r"|pouvez-vous|peut-on|sais-tu)\b",
    _I,
)
_QUESTION_CJK = _lazy(
    r"[吗呢][。.]?$|什么|怎么|为什么|为何|哪里|哪个|哪儿|如何|是否|多少|谁"
    r"|何|なぜ|どう|どこ|どれ|誰|か[。.]?$"
    r"|뭐|왜|어떻게|어디|누구|언제|무엇|[까니냐][요]?[.。]?$|나요[.。]?$"
)

_REQUEST_START = _lazy(
    r"^(?:please|pls|kindly|can\s+you|could\s+you|would\s+you|will\s+you|let's|lets|let\s+us"
    r"|go\s+ahead|i\s+need\s+you\s+to|i\s+want\s+you\s+to|i'd\s+like\s+you\s+to|try|now"
    r"|also|then|next|remember\s+to|don't\s+forget\s+to"
    r"|add|fix|run|rerun|write|update|refactor|rename|remove|delete|create|make|change"
    r"|implement|move|commit|push|merge|revert|show|explain|check|review|generate|install"
    r"|set\s+up|build|test|debug|look|open|close|read|find|replace|convert|split|clean|format"
    r"|lint|bump|document|ignore|skip|disable|enable|start|stop|deploy|retry|continue|undo"
    r"|print|list|summari[sz]e|translate|compare|describe|tell|give|send|help|fetch|pull"
    r"|ajoute|corrige|fais|lance|supprime|renomme|mets|écris|crée|vérifie|explique|montre"
    r"|désactive|active|change|modifie|teste)\b",
    _I,
)
# "just rename it", "ok so now add …": words that open a request without changing it
_SOFTENER = _lazy(r"^(?:(?:just|simply|quickly|so|and|ok|okay|alright|now|then|also)\b[,\s]*)+", _I)

_REQUEST_CJK = _lazy(
    r"^(?:请|帮我|麻烦|能不能|可以帮|给我)"
    r"|(?:ください|下さい|てほしい|お願いします|お願い)[。.!！]?$"
    r"|(?:주세요|줘|줄래|해라)[.。!！]?$"
)

_THANKS = _lazy(
    r"^(?:thanks|thank\s+you|thx|ty|great|perfect|nice|cool|awesome|excellent|ok|okay|sounds"
    r"\s+good|looks\s+good|lgtm|got\s+it|all\s+good|merci|parfait|super|génial|d'accord"
    r"|谢谢|多谢|好的|没问题|ありがとう|了解|감사|고마워|좋아)\b",
    _I,
)

_CHATTER = _lazy(
    r"^(?:i\s+think|i\s+guess|i\s+suspect|maybe|probably|perhaps|it\s+seems|seems\s+like"
    r"|looks\s+like|here\s+is|here's|here\s+are|this\s+is|that\s+is|that's|it's|it\s+is"
    r"|this|that|it|same|still|hmm|oh|wait|oops|je\s+pense|peut-être|我觉得|可能)\b"
    r"|\bon\s+my\s+machine\b|\bfor\s+me\b|\bi'm\s+seeing\b|\bi\s+(?:get|got)\b"
    r"|\bsame\s+error\b|\bdid(?:n't|\s+not)\s+work\b|\bstack\s*trace\b|\btraceback\b"
    r"|^i'm\s+\w+ing\b",
    _I,
)

# A general rule: what makes an imperative a standing instruction rather than a task.
_RULE = _lazy(
    r"\b(?:always|never|don't|do\s+not|must\s+not|mustn't|should\s+not|shouldn't|avoid"
    r"|instead\s+of|rather\s+than|from\s+now\s+on|every\s+time|whenever|by\s+default"
    r"|make\s+sure|be\s+sure\s+to|prefer|no\s+more)\b"
    r"|\b(?:toujours|jamais|il\s+faut|évite[rz]?|ne\s+pas)\b"
    r"|不要|别再|必须|务必|总是|永远|禁止|必ず|いつも|絶対|禁止|しないで|반드시|항상|절대|하지\s*마",
    _I,
)

# A pointer: a URL, a chat channel, or a named outside system ...
_REFERENCE = _lazy(
    r"https?://|\bwww\.|(?:^|\s)#[a-z][\w-]+"
    r"|\b(?:jira|notion|confluence|pagerduty|opsgenie|sentry|kibana|grafana|datadog|vault"
    r"|linear|airtable|google\s+docs?|sharepoint)\b",
    _I,
)
# ... or a generic place (dashboard, runbook, wiki) that the sentence names or locates.
_PLACE = _lazy(
    r"\b(?:dashboards?|board|runbooks?|wiki|tracker|calendar|spreadsheet|playbook|handbook"
    r"|channel|space|folder)\b|\btableau\s+de\s+bord\b|看板|仪表盘|ダッシュボード|대시보드",
    _I,
)
_NAMED = _lazy(
    r"['\"“‘「]|\S/\S|\b(?:in|on|at|under|called|named)\s+"
    r"(?!(?:Mon|Tues|Wednes|Thurs|Fri|Satur|Sun)days?\b|(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep"
    r"|Oct|Nov|Dec)[a-z]*\b)[A-Z]"
)


_USER = _lazy(
    r"^(?:i'm|i\s+am|i've\s+been|i\s+have\s+been|i\s+work|i\s+prefer|i\s+like|i\s+love"
    r"|i\s+hate|i\s+dislike|i\s+don't\s+like|i'd\s+rather|i\s+know|i\s+don't\s+know"
    r"|i\s+report|i\s+lead|i\s+manage|i\s+own|i\s+live|i\s+speak|i\s+use\s+a"
    r"|my\s+(?:role|job|title|timezone|time\s+zone|background|team|manager|name|pronouns"
    r"|preferred|favou?rite|focus|goal|goals|main\s+language|day)"
    r"|je\s+suis|je\s+préfère|j'aime|je\s+travaille|mon\s+rôle|je\s+ne\s+connais)\b"
    r"|^(?:我是|我不太|我不熟悉|我喜欢|我负责|我习惯|我在|私は|僕は|わたしは|저는|나는|제가)",
    _I,
)

_PROJECT = _lazy(
    r"(?i:\b(?:we|we're|we've|our|us|nous|notre|nos|on\s+a)\b"
    r"|\b(?:every|each|nightly|weekly|daily|monthly|quarterly|sundays?|mondays?|tuesdays?"
    r"|wednesdays?|thursdays?|fridays?|saturdays?|production|prod|staging|release|deadline"
    r"|freeze|customer|customers)\b)"
    r"|\d|\b[a-z][a-z0-9-]*[/_.][\w.-]*[a-z0-9]|\b[a-z]+[A-Z]\w*|\b[A-Z][a-z]+[A-Z]\w*"
    r"|我们|生产|线上|上线|发布|每周|每天|本番|毎週|毎日|リリース|매주|매일|정기|배포|운영",
)

_REASON = _lazy(
    r"(?:,|;|\s)\s*(?:because|since|as\s+otherwise|otherwise|car|parce\s+que)\s+(?=\S)"
    r"|;\s+(?=\S)|，?因为|，否则",
    _I,
)

_SENTENCE_END = _lazy(r"(?<=[.!?])\s+(?=[A-Z\"'(\u3040-\u9fff\uac00-\ud7af])|(?<=[。！？])")


def sentences(text: str) -> list[str]:
    """The sentences of a message (split at ``. X``, ``! X``, ``? X`` and CJK full stops)."""
    return [part.strip() for part in _SENTENCE_END().split(text) if part.strip()]


def strip_lead_in(text: str) -> tuple[str, bool]:
    """``remember: X`` → (``X``, True); text without a lead-in → (text, False).

    The spec's bare form (``note the service runs on 8080``, §7.5 step 2) is stripped too but
    does not count as explicit: ``save the file and rerun`` is still judged as a request.
    """
    match = _LEAD_IN().match(text)
    if match is not None and text[match.end() :].strip():
        return text[match.end() :].lstrip(" :-–—"), True
    bare = _BARE_LEAD_IN().match(text)
    if bare is not None and text[bare.end() :].strip():
        return text[bare.end() :].lstrip(" :-–—"), False
    return text, False


def talk_kind(sentence: str, explicit: bool = False) -> TalkKind | None:
    """Why ``sentence`` is not a memory, or None when it may be one.

    ``explicit`` means the user said ``remember that``: that alone is not a request.
    """
    text = sentence.strip()
    if _TEMPORARY().search(text):
        return "temporary"
    if text.endswith(("?", "？")) or _QUESTION_START().match(text) or _QUESTION_CJK().search(text):
        return None if _conditional_rule(text) else "question"
    if _THANKS().match(text):
        return "thanks"
    if not explicit and _is_request(_SOFTENER().sub("", text)):
        return "request"
    if _CHATTER().search(text):
        return "chatter"
    return None


def _conditional_rule(text: str) -> bool:
    """``When you deploy, always …``: a wh-word that opens a rule, not a question."""
    return (
        not text.endswith(("?", "？"))
        and re.match(r"^(?:when|whenever|if|before|after)\b[^,]*,", text, _I) is not None
        and _RULE().search(text) is not None
    )


def _is_request(text: str) -> bool:
    if _REQUEST_START().match(text) or _REQUEST_CJK().search(text):
        return _RULE().search(text) is None  # "always use X" is a rule, "use X here" a task
    return False


def memory_type(sentence: str) -> MemoryType | None:
    """The memory type of a durable sentence, or None when nothing marks it as durable."""
    if _REFERENCE().search(sentence) or (_PLACE().search(sentence) and _NAMED().search(sentence)):
        return "reference"
    if _USER().match(sentence):
        return "user"
    if _RULE().search(sentence):
        return "feedback"
    if _PROJECT().search(sentence):
        return "project"
    return None


def split_reason(sentence: str) -> tuple[str, str | None]:
    """``Never X because Y`` → (``Never X``, ``Y``); no reason clause → (sentence, None)."""
    match = _REASON().search(sentence)
    if match is None or match.start() < 12:
        return sentence, None
    head = sentence[: match.start()].rstrip(" ,;，")
    reason = sentence[match.end() :].strip()
    if len(reason) < 8:
        return sentence, None
    return head + _end_mark(head), reason[0].upper() + reason[1:]


_SO = _lazy(r",\s+so\s+(?=\S)|，所以|, donc\s+", _I)
_IMPERATIVE = _lazy(
    r"^(?:don't|do\s+not|never|always|avoid|please|use|explain|keep|make|check|ask|prefer"
    r"|write|run|add|put|skip|send|tell|show|give|schedule|mention|wait|stop|start|follow"
    r"|ne\s+|n'|évite|utilise|不要|请|别)",
    _I,
)


def split_apply(sentence: str) -> tuple[str, str | None]:
    """``I'm new to Kubernetes, so explain kubectl commands`` → the fact and how to apply it.

    Only an imperative after ``, so`` is split off; ``…, so 3.12 syntax breaks`` stays whole.
    """
    match = _SO().search(sentence)
    if match is None or match.start() < 12:
        return sentence, None
    tail = sentence[match.end() :].strip()
    if len(tail) < 8 or not _IMPERATIVE().match(tail):
        return sentence, None
    head = sentence[: match.start()].rstrip(" ,，")
    return head + _end_mark(head), tail[0].upper() + tail[1:]


def _end_mark(text: str) -> str:
    if not text or text[-1] in ".!。！":
        return ""
    return "。" if "\u3000" <= text[-1] <= "\u9fff" else "."


def short_name(sentence: str) -> str:
    """A name for the memory: the fact's first clause when it has a few words, else the fact.

    ``Our staging cluster is called kiwi, production is mango`` is named ``Our staging cluster
    is called kiwi``; the file's description keeps the whole sentence.
    """
    text = sentence.rstrip(" .。!！")
    clause = re.split(r"[,;:]\s|\s[—–-]\s|[，；]", text, maxsplit=1)[0].strip()
    return clause if len(clause.split()) >= 3 or len(clause) >= 12 else text
