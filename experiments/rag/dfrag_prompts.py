"""DF-RAG's prompts (Khan et al., Findings of EACL 2026): Planner, Evaluator, generator.

The paper's prompt text could not be read from the stored copy available to this project (only
its abstract). These prompts keep the structure, the 0-5 rubric and the reply formats of the
authors' public prompts (repository SaadatKhan/DF-RAG: a Planner with one worked example and
numbered sub-questions; an Evaluator shown the plan and the chunks, not the question, with a
six-level rubric, three worked examples of full / no / partial support and the reply format
"<i>. Score: <0-5>. Short Explanation: <text>" ... "Total Score: <sum>"), in this module's own
words and with its own examples. The generator prompt is LongBench's multi-document QA prompt
(Bai et al., 2024) with a role line, as DF-RAG uses it. Every class that sends one takes the
text as an argument, so the paper's exact wording can be passed in.
"""
from __future__ import annotations

__all__ = [
    "PLANNER_SYSTEM_PROMPT", "PLANNER_USER_TEMPLATE", "EVALUATOR_SYSTEM_PROMPT", "EVALUATOR_EXAMPLES",
    "EVALUATOR_USER_TEMPLATE", "REASK_TEMPLATE",
]

# ---------------------------------------------------------------------------------------------
PLANNER_SYSTEM_PROMPT = """You are an expert planner that decomposes questions.
Break the user's single question into the minimal ordered list of sub-questions that must all be
answered to answer the original question fully, using only your own knowledge of how such
questions are answered. Write one sub-question per line, numbered as in this example.

Question: Which river flows through the birthplace of the painter of 'Harbour at Dusk'?
Plan:
1) Identify the painter of 'Harbour at Dusk'
2) Identify where the painter was born
3) Identify the river that flows through that place

Write only the plan, with no other commentary."""

PLANNER_USER_TEMPLATE = "QUESTION:\n{question}"

EVALUATOR_SYSTEM_PROMPT = (
    "You are a strict judge of retrieved text chunks. Count only information the chunks state explicitly."
)

EVALUATOR_EXAMPLES = """Example 1
Plan:
1) Find the author of the novel 'The Glass Harbor'
2) Find the author's country of birth
3) Find the capital of that country
Chunks:
- "The Glass Harbor is a 1998 novel by Mira Tanaka about a lighthouse keeper and his daughter..."
- "Mira Tanaka was born in Canada in 1961 and later studied in Montreal..."
- "Ottawa is the capital city of Canada, on the south bank of the Ottawa River..."
1. Score: 5. Short Explanation: Mira Tanaka is named as the author.
2. Score: 5. Short Explanation: Born in Canada is stated directly.
3. Score: 5. Short Explanation: Ottawa is stated as Canada's capital.
Total Score: 15

Example 2
Plan:
1) Find the composer of the opera 'Night Ferry'
2) Find the composer's teacher
3) Find the year the opera premiered
Chunks:
- "Night Ferry follows two strangers who meet on a crossing in a winter storm..."
- "The soprano role of Ilse was written for a coloratura voice..."
- "Critics praised the staging and the lighting of the final act..."
1. Score: 0. Short Explanation: No composer is named.
2. Score: 0. Short Explanation: No teacher is mentioned.
3. Score: 0. Short Explanation: No premiere date is given.
Total Score: 0

Example 3
Plan:
1) Find the founder of the company Arlo Works
2) Find the founder's age
3) Find the number of factories the company runs
Chunks:
- "Arlo Works was set up by the younger brother of the chemist Ada Lind..."
- "Ada Lind and her brother Per Lind grew up in Uppsala..."
- "Today Arlo Works runs twelve factories across northern Europe..."
1. Score: 3. Short Explanation: Per Lind follows from the family relation.
2. Score: 0. Short Explanation: No age is given.
3. Score: 5. Short Explanation: Twelve factories is stated directly.
Total Score: 8"""

EVALUATOR_USER_TEMPLATE = """Score each question of the plan from 0 to 5 by how directly the chunks answer it:
5: an explicit answer, the specific facts or numbers stated directly
4: a clear and complete answer from directly relevant information
3: a mostly complete answer; a minor detail is missing but can be inferred
2: partial information; key details are missing
1: very limited relevance, mostly vague
0: no relevant information, or only by inference

Strict rules:
- Count only information stated directly in the chunks.
- Give no points for logical leaps or inferences.
- Give no points for vague or tangential content.

Keep each short explanation under 20 tokens. Answer with one line per question, in plan order,
"<number>. Score: <0-5>. Short Explanation: <text>", and end with "Total Score: <sum>".

Follow the examples:

{examples}

Now do the same for the following.

Plan:
{plan}

Chunks:
{chunks}

For each question of the plan, judge whether the information it needs is clearly and explicitly
present in the chunks; together the chunks should cover every kind of information the steps need."""

#: DF-RAG's generator prompt: LongBench's multi-document QA prompt (Bai et al., 2024) with a
#: role line, one user message, as in the authors' public code. ``{context}`` is the passages
#: (and, for +IC, the extra context) separated by blank lines.

#: Sent after a reply that cannot be parsed (``reason``: the parse error, ``detail``: the format).
REASK_TEMPLATE = ("Your reply could not be used: {reason}. Reply again in exactly the required format{detail}.")
