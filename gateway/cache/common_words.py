"""The frequency list the semantic cache's guard ships: English words so common, and so rarely
what an answer depends on, that two prompts may differ in them and still ask the same thing
(function words, auxiliaries, pronouns, politeness and the verbs that frame a request). Any
word not here is answer-bearing. Written for this project; words that change an answer even
when common (negations, directions, comparisons, who/when/where/why/how) are deliberately absent."""
from __future__ import annotations

COMMON = frozenset("""
a an the this that these those some any each every all both either
i me my mine we us our ours you your yours he him his she her hers it its they them their theirs
myself yourself itself ourselves themselves one ones
is am are was were be been being do does did done doing have has had having
can could would should shall will may might must
what which whatever
of in on at by for with about as
and also then so too just very really quite
if whether because since while
please kindly thanks thank hi hello hey ok okay
tell give show name find say know want need like help get got let
explain describe compute calculate answer question quick quickly briefly simply exactly actually
there here
something anything thing things way
s
""".split())
