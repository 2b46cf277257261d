"""Tier 1 requests written as people type them: search queries, small talk, lookups,
one-line conversions, role-play openers, and long pasted text with a trivial question.
Each entry is one whole request (not a template), so variety comes from the writing."""

SIMPLE = [
    # search-engine style questions
    "how tall is the eiffel tower", "population of canada 2023", "who wrote pride and prejudice",
    "best time to visit iceland", "what time zone is chicago in", "boiling point of water in fahrenheit",
    "how many ounces in a cup", "capital of australia", "when did ww2 end", "is a tomato a fruit",
    "how long to boil an egg", "what does rsvp mean", "meaning of the word ephemeral",
    "how many players on a soccer team", "distance from earth to moon", "who painted the mona lisa",
    "what year did the titanic sink", "largest ocean on earth", "how many bones in the human body",
    "what is the speed of light", "define photosynthesis", "synonym for happy", "antonym of generous",
    "how to spell necessary", "what is the plural of cactus", "how many days until christmas from dec 1",
    "calories in a banana", "who is the ceo of microsoft", "what language do they speak in brazil",
    "how much is a kilogram in pounds", "what is 15 percent of 80", "convert 30 celsius to fahrenheit",
    "what is the square root of 144", "how many feet in a mile", "what does DNA stand for",
    "what is the chemical symbol for gold", "who discovered penicillin", "tallest mountain in africa",
    "how many continents are there", "what's the currency of japan", "what does HTTP stand for",
    "python get length of list", "git undo last commit", "how to exit vim", "ctrl+z on mac",
    "what port does ssh use", "what is localhost", "json vs yaml", "what does sudo mean",
    "how to make text bold in markdown", "excel sum formula", "google docs word count shortcut",
    # small talk and chit-chat
    "hi", "hello!", "hey there", "good morning :)", "thanks!", "thank you so much, that helped",
    "how are you today?", "lol that's funny", "can you tell me a joke", "tell me a fun fact",
    "what's your name?", "are you a robot?", "i'm bored", "ok cool", "goodnight",
    "Say hello to my friend Sam.", "What's a good name for a goldfish?", "Flip a coin for me.",
    "Pick a random number between 1 and 10.", "Give me a motivational quote.",
    "What should I have for dinner tonight, pizza or pasta?", "Recommend a good comedy movie.",
    # role-play openers and tiny writing asks
    "pretend you're a pirate and say good morning", "talk like a cowboy and greet me",
    "You are a friendly barista. Ask me what I'd like to order.",
    "Act as my gym buddy and cheer me on for finishing a workout.",
    "Write one sentence wishing my mom a happy birthday.", "Give me a rhyme for 'orange'.",
    "Suggest a caption for a beach photo.", "Give me three names for a coffee shop.",
    # one-line edits and classification
    "Fix the grammar: 'me and him goes to the store yesterday'",
    "Is this sentence positive or negative: 'The service was painfully slow.'",
    "Translate 'thank you' into German.", "What is 'cat' in Spanish?",
    "Make this sound more polite: 'send me the file now'", "Capitalise this title: the old man and the sea",
    "Is 'irregardless' a real word?", "Which is correct: 'affect' or 'effect' in 'the effect of rain'?",
    "Sort these numbers: 9, 2, 7, 4", "Which is bigger, 0.7 or 0.65?", "What is 12 times 12?",
    "Is 91 a prime number?", "Round 3.14159 to two decimals.", "What day comes after Thursday?",
    # long pasted text with a trivial question (length is not difficulty)
    "What language is this code written in?\n\n{code}",
    "How many lines does this snippet have?\n{code}",
    "Does this text mention the billing system? Yes or no.\n\n{document}",
    "What is the title I should give this note, in three words max?\n\n{document}",
    "Who is mentioned first in this paragraph?\n{document}",
    "Here's my email draft, just tell me if it has any typos in the first sentence:\n\n{document}",
    "Is this JSON or YAML?\n```\nname: app\nversion: 2\nreplicas: 3\n```",
    "what does this error mean: ModuleNotFoundError: No module named 'requests'",
    "Thanks for the summary above! Could you just bold the first word?",
]
