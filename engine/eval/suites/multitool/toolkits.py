"""The tools of the ``multitool`` suite: five domains, each needing several calls across rounds.

Every task gets fresh instances (the browser keeps its page and history per task). The data are
small and deterministic, so each task has one right answer.
"""

from __future__ import annotations

import base64
from typing import Any

from codeact.toolkits import operation, toolkit

# -- message decoding ------------------------------------------------------------------------------


@toolkit(name="cipher", description="Decoding helpers for scrambled messages")
class Cipher:
    """Classical encodings: Caesar shifts, reversal, hex and base64, plus a letter counter."""

    @operation
    async def caesar(self, text: str, shift: int) -> str:
        """Shift every letter of ``text`` forward by ``shift`` places (negative shifts decode).

        Args:
            text: The text; non-letters stay as they are.
            shift: Places to shift, e.g. -3 to undo a shift of 3.
        """
        out = []
        for ch in text:
            if ch.isascii() and ch.isalpha():
                base = ord("a") if ch.islower() else ord("A")
                out.append(chr(base + (ord(ch) - base + shift) % 26))
            else:
                out.append(ch)
        return "".join(out)

    @operation
    async def reverse(self, text: str) -> str:
        """The text backwards.

        Args:
            text: The text.
        """
        return text[::-1]

    @operation
    async def from_hex(self, text: str) -> str:
        """Decode hexadecimal digits to UTF-8 text.

        Args:
            text: Hex digits, e.g. "6869".
        """
        return bytes.fromhex(text).decode("utf-8")

    @operation
    async def from_base64(self, text: str) -> str:
        """Decode base64 to UTF-8 text.

        Args:
            text: Base64, e.g. "aGk=".
        """
        return base64.b64decode(text.encode("ascii")).decode("utf-8")

    @operation
    async def count_letters(self, text: str, letters: str) -> int:
        """How many characters of ``text`` are among ``letters`` (case-insensitive).

        Args:
            text: The text.
            letters: The letters to count, e.g. "aeiou".
        """
        wanted = set(letters.lower())
        return sum(1 for ch in text.lower() if ch in wanted)


# -- DNA sequences ---------------------------------------------------------------------------------

_CODONS = {
    "TTT": "F", "TTC": "F", "TTA": "L", "TTG": "L", "CTT": "L", "CTC": "L", "CTA": "L", "CTG": "L",
    "ATT": "I", "ATC": "I", "ATA": "I", "ATG": "M", "GTT": "V", "GTC": "V", "GTA": "V", "GTG": "V",
    "TCT": "S", "TCC": "S", "TCA": "S", "TCG": "S", "CCT": "P", "CCC": "P", "CCA": "P", "CCG": "P",
    "ACT": "T", "ACC": "T", "ACA": "T", "ACG": "T", "GCT": "A", "GCC": "A", "GCA": "A", "GCG": "A",
    "TAT": "Y", "TAC": "Y", "TAA": "*", "TAG": "*", "CAT": "H", "CAC": "H", "CAA": "Q", "CAG": "Q",
    "AAT": "N", "AAC": "N", "AAA": "K", "AAG": "K", "GAT": "D", "GAC": "D", "GAA": "E", "GAG": "E",
    "TGT": "C", "TGC": "C", "TGA": "*", "TGG": "W", "CGT": "R", "CGC": "R", "CGA": "R", "CGG": "R",
    "AGT": "S", "AGC": "S", "AGA": "R", "AGG": "R", "GGT": "G", "GGC": "G", "GGA": "G", "GGG": "G",
}  # fmt: skip
_PAIR = {"A": "T", "T": "A", "G": "C", "C": "G"}


def _clean(seq: str) -> str:
    seq = seq.strip().upper()
    bad = sorted(set(seq) - set(_PAIR))
    if bad:
        raise ValueError(f"not a DNA sequence: unexpected letters {''.join(bad)} (use A, C, G, T)")
    return seq


@toolkit(name="dna", description="DNA sequence tools")
class Dna:
    """Complements, GC content, translation and motif search on DNA strings (A, C, G, T)."""

    @operation
    async def reverse_complement(self, seq: str) -> str:
        """The reverse complement of a sequence.

        Args:
            seq: A DNA sequence.
        """
        return "".join(_PAIR[b] for b in reversed(_clean(seq)))

    @operation
    async def gc_content(self, seq: str) -> float:
        """The fraction of G and C bases, rounded to 4 decimals.

        Args:
            seq: A DNA sequence.
        """
        s = _clean(seq)
        return round(sum(1 for b in s if b in "GC") / len(s), 4) if s else 0.0

    @operation
    async def translate(self, seq: str) -> str:
        """Translate codons to one-letter amino acids from the first base, stopping at a stop codon.

        Args:
            seq: A DNA sequence (a trailing partial codon is ignored).
        """
        s = _clean(seq)
        protein = []
        for i in range(0, len(s) - 2, 3):
            amino = _CODONS[s[i : i + 3]]
            if amino == "*":
                break
            protein.append(amino)
        return "".join(protein)

    @operation
    async def find_motif(self, seq: str, motif: str) -> list[int]:
        """0-based start positions of ``motif`` in ``seq`` (overlapping matches count).

        Args:
            seq: A DNA sequence.
            motif: The motif to look for.
        """
        s, m = _clean(seq), _clean(motif)
        return [i for i in range(len(s) - len(m) + 1) if s[i : i + len(m)] == m]


# -- trade calculations ----------------------------------------------------------------------------

_PRICES: dict[str, list[float]] = {
    "ACME": [102.5, 104.0, 101.25, 99.8, 105.6, 108.1, 107.3],
    "GLOBEX": [54.2, 55.0, 57.35, 56.1, 58.9, 60.05, 59.4],
    "INITECH": [12.4, 12.15, 11.9, 12.8, 13.35, 13.1, 14.0],
    "UMBRELLA": [230.0, 228.4, 233.9, 240.2, 238.75, 245.1, 244.0],
}
_CURRENCY = {"ACME": "USD", "GLOBEX": "USD", "INITECH": "EUR", "UMBRELLA": "GBP"}
_TO_USD = {"USD": 1.0, "EUR": 1.08, "GBP": 1.27, "JPY": 0.0067, "CHF": 1.12}


@toolkit(name="trade", description="Market data: closing prices, currencies, FX rates and broker fees")
class Trade:
    """Seven trading days (day 1 to 7) of closing prices for a few listed companies."""

    @operation
    async def price(self, symbol: str, day: int) -> float:
        """Closing price of ``symbol`` on ``day`` (1-7), in the listing currency.

        Args:
            symbol: The ticker, e.g. "ACME".
            day: Trading day 1 to 7.
        """
        prices = _PRICES.get(symbol.upper())
        if prices is None:
            raise LookupError(f"unknown symbol {symbol!r} (known: {', '.join(sorted(_PRICES))})")
        if not 1 <= day <= len(prices):
            raise ValueError(f"day must be 1 to {len(prices)}, got {day}")
        return prices[day - 1]

    @operation
    async def currency(self, symbol: str) -> str:
        """The currency ``symbol`` is listed in (USD, EUR, GBP).

        Args:
            symbol: The ticker.
        """
        try:
            return _CURRENCY[symbol.upper()]
        except KeyError:
            raise LookupError(f"unknown symbol {symbol!r}") from None

    @operation
    async def fx_rate(self, source: str, target: str) -> float:
        """How many units of ``target`` one unit of ``source`` buys (rounded to 6 decimals).

        Args:
            source: Currency code, e.g. "EUR".
            target: Currency code, e.g. "USD".
        """
        try:
            return round(_TO_USD[source.upper()] / _TO_USD[target.upper()], 6)
        except KeyError:
            raise LookupError(f"unknown currency in {source}/{target} (known: {', '.join(_TO_USD)})") from None

    @operation
    async def fee(self, amount: float) -> float:
        """The broker's fee for one order worth ``amount``: 0.5 % with a minimum of 2.00 (rounded to cents).

        Args:
            amount: The order's value in its currency.
        """
        return round(max(2.0, abs(amount) * 0.005), 2)


# -- travel planning -------------------------------------------------------------------------------

_FLIGHTS: list[dict[str, Any]] = [
    {"id": "TR101", "origin": "Berlin", "destination": "Lisbon", "price": 189.0, "hours": 3.5, "stops": 0},
    {"id": "TR102", "origin": "Berlin", "destination": "Lisbon", "price": 142.0, "hours": 6.0, "stops": 1},
    {"id": "TR103", "origin": "Berlin", "destination": "Rome", "price": 121.0, "hours": 2.2, "stops": 0},
    {"id": "TR104", "origin": "Berlin", "destination": "Rome", "price": 98.0, "hours": 5.1, "stops": 1},
    {"id": "TR105", "origin": "Paris", "destination": "Lisbon", "price": 110.0, "hours": 2.6, "stops": 0},
    {"id": "TR106", "origin": "Paris", "destination": "Rome", "price": 135.0, "hours": 2.0, "stops": 0},
    {"id": "TR107", "origin": "Paris", "destination": "Oslo", "price": 160.0, "hours": 2.4, "stops": 0},
    {"id": "TR108", "origin": "Berlin", "destination": "Oslo", "price": 95.0, "hours": 1.9, "stops": 0},
    {"id": "TR109", "origin": "Lisbon", "destination": "Rome", "price": 130.0, "hours": 3.0, "stops": 0},
    {"id": "TR110", "origin": "Rome", "destination": "Oslo", "price": 175.0, "hours": 3.4, "stops": 0},
    {"id": "TR111", "origin": "Oslo", "destination": "Berlin", "price": 99.0, "hours": 1.9, "stops": 0},
    {"id": "TR112", "origin": "Lisbon", "destination": "Berlin", "price": 170.0, "hours": 3.6, "stops": 0},
]
_HOTELS: dict[str, list[dict[str, str | float]]] = {
    "Lisbon": [
        {"name": "Alfama Rooms", "nightly": 85.0, "rating": 4.1},
        {"name": "Tejo Grand", "nightly": 160.0, "rating": 4.7},
        {"name": "Bairro Hostel", "nightly": 40.0, "rating": 3.6},
    ],
    "Rome": [
        {"name": "Trastevere Inn", "nightly": 110.0, "rating": 4.4},
        {"name": "Colosseo Suites", "nightly": 210.0, "rating": 4.8},
        {"name": "Termini Budget", "nightly": 60.0, "rating": 3.4},
    ],
    "Oslo": [
        {"name": "Fjord Hotel", "nightly": 150.0, "rating": 4.5},
        {"name": "Grunerlokka Lodge", "nightly": 95.0, "rating": 4.0},
    ],
    "Berlin": [
        {"name": "Spree Loft", "nightly": 120.0, "rating": 4.3},
        {"name": "Kreuzberg Bunk", "nightly": 35.0, "rating": 3.2},
    ],
}
_WEATHER = {"Lisbon": 24, "Rome": 27, "Oslo": 14, "Berlin": 18, "Paris": 19}


@toolkit(name="travel", description="Travel search: flights, hotels and the weather forecast")
class Travel:
    """A small travel agency's inventory (prices in EUR)."""

    @operation
    async def flights(self, origin: str, destination: str) -> list[dict[str, Any]]:
        """Direct or one-stop flights from ``origin`` to ``destination`` (id, price, hours, stops).

        Args:
            origin: City, e.g. "Berlin".
            destination: City, e.g. "Lisbon".
        """
        return [
            {k: f[k] for k in ("id", "price", "hours", "stops")}
            for f in _FLIGHTS
            if f["origin"].lower() == origin.lower() and f["destination"].lower() == destination.lower()
        ]

    @operation
    async def hotels(self, city: str) -> list[dict[str, Any]]:
        """Hotels in ``city`` with their nightly price and guest rating (0-5).

        Args:
            city: The city.
        """
        return [dict(h) for h in _HOTELS.get(city.title(), [])]

    @operation
    async def forecast(self, city: str) -> int:
        """Tomorrow's high temperature in ``city`` in degrees Celsius.

        Args:
            city: The city.
        """
        try:
            return _WEATHER[city.title()]
        except KeyError:
            raise LookupError(f"no forecast for {city!r} (known: {', '.join(_WEATHER)})") from None


# -- a stateful web browser ------------------------------------------------------------------------

_PAGES: dict[str, dict[str, Any]] = {
    "home": {
        "text": "Welcome to Northwind Outfitters. Browse our catalogue or read the store news.",
        "links": {"Catalogue": "catalogue", "News": "news", "Contact": "contact"},
    },
    "catalogue": {
        "text": "Catalogue. Categories: tents, stoves, packs.",
        "links": {"Tents": "tents", "Stoves": "stoves", "Packs": "packs", "Home": "home"},
    },
    "tents": {
        "text": "Tents.",
        "links": {"Summit 2": "summit-2", "Meadow 4": "meadow-4", "Catalogue": "catalogue"},
    },
    "stoves": {
        "text": "Stoves.",
        "links": {"Ember Mini": "ember-mini", "Ember Max": "ember-max", "Catalogue": "catalogue"},
    },
    "packs": {
        "text": "Packs.",
        "links": {"Ridge 40": "ridge-40", "Ridge 65": "ridge-65", "Catalogue": "catalogue"},
    },
    "summit-2": {"text": "Summit 2 tent. Price: 349 EUR. Weight: 1.9 kg. Stock: 12.", "links": {"Tents": "tents"}},
    "meadow-4": {"text": "Meadow 4 tent. Price: 289 EUR. Weight: 4.6 kg. Stock: 3.", "links": {"Tents": "tents"}},
    "ember-mini": {
        "text": "Ember Mini stove. Price: 59 EUR. Weight: 0.3 kg. Stock: 40.",
        "links": {"Stoves": "stoves"},
    },  # noqa: E501
    "ember-max": {"text": "Ember Max stove. Price: 119 EUR. Weight: 0.9 kg. Stock: 0.", "links": {"Stoves": "stoves"}},
    "ridge-40": {"text": "Ridge 40 pack. Price: 139 EUR. Weight: 1.2 kg. Stock: 7.", "links": {"Packs": "packs"}},
    "ridge-65": {"text": "Ridge 65 pack. Price: 179 EUR. Weight: 1.8 kg. Stock: 5.", "links": {"Packs": "packs"}},
    "news": {
        "text": "News. Spring sale: 15 percent off all stoves until May 31. New store opens in Bergen.",
        "links": {"Home": "home"},
    },
    "contact": {
        "text": "Contact. Email: help@northwind.example. Phone: +47 555 0100. Open 9-17, Monday to Saturday.",
        "links": {"Home": "home"},
    },
}


@toolkit(name="browser", description="A text web browser on the Northwind Outfitters shop (keeps its page)")
class Browser:
    """Starts on the home page; follow links by their text, go back, read the current page."""

    def __init__(self) -> None:
        self._page = "home"
        self._history: list[str] = []

    def _view(self) -> dict[str, Any]:
        page = _PAGES[self._page]
        return {"page": self._page, "text": page["text"], "links": sorted(page["links"])}

    @operation
    async def read(self) -> dict[str, Any]:
        """The current page: its name, text and the link texts you can click."""
        return self._view()

    @operation
    async def click(self, link: str) -> dict[str, Any]:
        """Follow a link of the current page by its text; returns the new page.

        Args:
            link: The link text exactly as listed by read(), e.g. "Catalogue".
        """
        links = _PAGES[self._page]["links"]
        if link not in links:
            raise LookupError(f"no link {link!r} on page {self._page!r} (links: {', '.join(sorted(links))})")
        self._history.append(self._page)
        self._page = links[link]
        return self._view()

    @operation
    async def back(self) -> dict[str, Any]:
        """Go back to the previous page; returns it."""
        if not self._history:
            raise LookupError("no previous page: this is the first page of the session")
        self._page = self._history.pop()
        return self._view()

    @operation
    async def visited(self) -> int:
        """How many link clicks the session has made so far."""
        return len(self._history)


TOOLKITS = (Cipher, Dna, Trade, Travel, Browser)
