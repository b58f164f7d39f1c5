"""DF-RAG's prompts (Khan et al., arXiv:2601.17212v1, Appendix A.3, Figs. 8-12), in divopt's words.

Each prompt keeps the figure's structure, fields, rubric, example content and output format;
the sentences are divopt's own (neither the paper's nor the authors' code's):

* **Planner** (Fig. 8): a role line ("Instruction"), the task (split the one question into the
  fewest ordered sub-questions that must all be answered, without outside help), one worked
  example (the birthplace of the author of the book 'Jacob', planned in two numbered steps), the
  rule to write the plan only, then the question. Reply: numbered lines ``1) ...``.
* **Evaluator** (Fig. 9, examples Figs. 10-11): a role line (a strict judge who counts only what
  the chunks state), the task (score each plan question 0-5 by how directly the chunks answer it)
  with the six-level rubric, three strict rules (explicit statements only; no credit for leaps or
  inferences; none for vague or tangential text), the demand to keep the reasoning compact and
  to end with ``Total Score: <total>``, three worked examples (Fig. 10: the lead of 'Inception',
  his birthplace and its population, all stated: 5/5/5 = 15; the director of 'Titanic', his net
  worth and his next projects, none stated: 0/0/0 = 0; Fig. 11: the author of 'Harry Potter' only
  reachable through a chain of relations (3), the author's age (0) and the number of books (5):
  8), then the plan and the candidate chunks. Each example states the judging rule after its
  chunks and replies ``<i>. Score: <0-5>. Short Explanation: <text>`` per step, then the total.
* **Generator** (Fig. 12): LongBench's multi-document QA layout with a role line; it is the
  ``dfrag`` template of :mod:`divopt_rag.experiments.rag.prompts`.

The examples' facts are the figures' (including Fig. 11's deliberately made-up family relation,
which is what makes its first step inferred rather than stated); their wording is divopt's.
Every class that sends a prompt takes the text as an argument, so other wordings plug in.
"""
from __future__ import annotations

__all__ = [
    "PLANNER_SYSTEM_PROMPT", "PLANNER_USER_TEMPLATE", "EVALUATOR_SYSTEM_PROMPT", "EVALUATOR_EXAMPLES",
    "EVALUATOR_USER_TEMPLATE", "EVALUATOR_JUDGING_RULE", "REASK_TEMPLATE", "format_chunks",
]

# ---------------------------------------------------------------------------------------------
# Planner (Fig. 8)
# ---------------------------------------------------------------------------------------------
PLANNER_SYSTEM_PROMPT = "Role: you are a planner whose job is to decompose questions into sub-questions."

PLANNER_USER_TEMPLATE = """Task: split the user's one question into the shortest sequence of sub-questions, in order, whose
answers together settle the original question completely. Rely on your own knowledge alone, and
copy the output layout of the example below exactly: the plan is a numbered list of sub-questions.

Question: In which place was the writer of the book 'Jacob' born?

Plan:
1) Find out who wrote 'Jacob'
2) Find out the birthplace of that writer

For the question below, write the plan and nothing else: no comments before or after it.

Question: {question}"""

# ---------------------------------------------------------------------------------------------
# Evaluator (Figs. 9-11)
# ---------------------------------------------------------------------------------------------
EVALUATOR_SYSTEM_PROMPT = ("Role: you are a strict judge of text chunks, and you give credit only for information "
                           "the chunks state outright.")

#: The sentence every worked example states after its chunks (and the task repeats).
EVALUATOR_JUDGING_RULE = ("Check, for every question of the plan, whether the chunks state the information it needs "
                          "clearly and outright; taken together, the chunks should supply every kind of information "
                          "the steps ask for.")


def format_chunks(chunks) -> str:
    """The chunk list as the figures lay it out: each chunk in double quotes, one per line."""
    return "\n".join(f'"{c}"' for c in chunks)


EVALUATOR_EXAMPLES = "\n\n".join([
    "Example 1\n\nPlan:\n"
    "1) Find the main character of the film 'Inception'\n"
    "2) Find where that character's actor was born\n"
    "3) Find how many people live in that city\n\nChunks:\n"
    + format_chunks([
        "Inception, a science-fiction film from 2010, casts Leonardo DiCaprio as Dom Cobb, a thief who breaks into "
        "the dreams of other people...",
        "Leonardo DiCaprio was born on November 11, 1974, in Los Angeles, California, in the United States...",
        "Los Angeles, the largest city of California, had about 4 million residents in 2023...",
    ])
    + f"\n\n{EVALUATOR_JUDGING_RULE}\n\n"
    "1. Score: 5. Short Explanation: The chunks name Leonardo DiCaprio as the main character.\n"
    "2. Score: 5. Short Explanation: His birth in Los Angeles, California is stated outright.\n"
    "3. Score: 5. Short Explanation: A population of about 4 million is given.\n\n"
    "Total Score: 15",
    "Example 2\n\nPlan:\n"
    "1) Find who directed the film 'Titanic'\n"
    "2) Find how wealthy that director is\n"
    "3) Find the director's next projects\n\nChunks:\n"
    + format_chunks([
        "Titanic, a 1997 romance set during a sea disaster, became a huge success at the box office...",
        "Among its 11 Academy Awards were Best Picture and Best Director...",
        "The two leads of this love story were played by Leonardo DiCaprio and Kate Winslet...",
    ])
    + f"\n\n{EVALUATOR_JUDGING_RULE}\n\n"
    "1. Score: 0. Short Explanation: No director is named; only the Best Director award is mentioned.\n"
    "2. Score: 0. Short Explanation: Nobody's wealth is mentioned.\n"
    "3. Score: 0. Short Explanation: Nothing is said about coming projects.\n\n"
    "Total Score: 0",
    "Example 3\n\nPlan:\n"
    "1) Find who wrote 'Harry Potter'\n"
    "2) Find how old that author is\n"
    "3) Find how many books the series has\n\nChunks:\n"
    + format_chunks([
        "Harry Potter, a fantasy book series written by James Franco's sister, became popular around the world...",
        "James Franco went on a trip to Europe with all of his siblings...",
        "While in Europe, Franco and JK Rowling played hockey, as all the siblings did...",
        "The series has seven main novels and a number of companion books...",
        "Rowling is now one of the most successful authors in modern publishing...",
    ])
    + f"\n\n{EVALUATOR_JUDGING_RULE}\n\n"
    "1. Score: 3. Short Explanation: J.K. Rowling as the author follows only from the family relations.\n"
    "2. Score: 0. Short Explanation: No chunk gives an age.\n"
    "3. Score: 5. Short Explanation: Seven main novels are stated outright.\n\n"
    "Total Score: 8",
])

EVALUATOR_USER_TEMPLATE = """Task: give every question of the plan a score from 0 to 5 for how directly the chunks answer it:

- 5: an explicit answer; the specific facts or numbers are stated outright
- 4: a clear and complete answer from information that bears on it directly
- 3: an answer that is mostly complete; a small detail is absent yet can be worked out
- 2: only part of the information; important details are absent
- 1: barely relevant, mostly vague
- 0: nothing relevant, or only reachable by inference

STRICT RULES:

- Count only what the chunks state outright.
- Give no points for logical leaps or inferences.
- Give no points for vague or off-topic content.

Keep the reasoning behind your scores brief, and do not forget this: finish with the line
Total Score: <Total Score>
Learn the task from these examples:

{examples}

Now do the same for this plan and these chunks:

Plan:
{plan}

Chunks:
{chunks}"""

#: Sent after a reply that cannot be parsed (``reason``: the parse error, ``detail``: the format).
#: divopt's addition: the paper does not say what happens to a malformed reply.
REASK_TEMPLATE = "Your reply could not be used: {reason}. Reply again in exactly the required format{detail}."
