"""A fair Wordle solver, for the warm start's demonstration games (stage 1 of --full).

It sees what a player sees: the game's text after each guess (the word it submitted and one mark per
letter), never the secret. It keeps the candidate words consistent with every mark so far and
guesses one of them at random. Its candidates are the words it is given: the warm start gives it
TextArena's secret-word list less the held-out words, so neither its secrets nor its guesses are
ever a word the evaluation keeps. Nothing here imports the lesson."""

import random
import re

FEEDBACK = re.compile(r"You submitted \[(?P<word>[a-z]{5})\]\.\s*Feedback:\s*\n[A-Z ]+\n(?P<marks>[GYX](?: [GYX]){4})")


def wordle_marks(guess: str, secret: str) -> str:
    """The marks TextArena's Wordle gives `guess` against `secret`: G right place, Y elsewhere in the
    word, X not in it. Greens first; then each other letter is Y while the secret still has an unused
    copy of it, from left to right (a repeated letter is Y only as often as the secret holds it)."""
    marks, unused = ["X"] * len(guess), list(secret)
    for i, (letter, wanted) in enumerate(zip(guess, secret, strict=True)):
        if letter == wanted:
            marks[i], unused[i] = "G", None
    for i, letter in enumerate(guess):
        if marks[i] == "X" and letter in unused:
            marks[i] = "Y"
            unused[unused.index(letter)] = None
    return "".join(marks)


def read_feedback(text: str) -> tuple[str, str] | None:
    """(word, marks) from the game's answer to a valid guess; None for any other answer."""
    found = FEEDBACK.search(text)
    return (found["word"], found["marks"].replace(" ", "")) if found else None


class ConsistentSolver:
    """Guesses, at random, a word consistent with every (word, marks) it has read so far."""

    def __init__(self, words: list[str], rng: random.Random):
        self.candidates = sorted(set(words))
        self.rng = rng

    def next_guess(self) -> str:
        if not self.candidates:
            raise ValueError("no candidate word is consistent with the marks read: the secret is not in the list given")
        return self.rng.choice(self.candidates)

    def read(self, answer: str) -> None:
        """Narrow the candidates with the game's answer to the last guess (only its text is read)."""
        feedback = read_feedback(answer)
        if feedback is not None:
            word, marks = feedback
            self.candidates = [c for c in self.candidates if c != word and wordle_marks(word, c) == marks]
