"""A fixed set of 50 short chat questions, written for these benchmarks (no dataset text)."""

CHAT_PROMPTS = [
    "What is the capital of France?", "What is the capital of Japan?", "How many legs does a spider have?",
    "What is 7 times 8?", "Name the largest planet in our solar system.", "What colour is the sky on a clear day?",
    "Who wrote Romeo and Juliet?", "What is the boiling point of water in Celsius?", "Translate 'thank you' into Spanish.",
    "What is the chemical symbol for gold?", "How many days are in a leap year?", "What is the square root of 81?",
    "Give me a synonym for 'happy'.", "What language is spoken in Brazil?", "What is photosynthesis, in one sentence?",
    "Write a haiku about autumn leaves.", "What is the opposite of 'ancient'?", "How many continents are there?",
    "Which ocean is the largest?", "What does a thermometer measure?", "Name three primary colours.",
    "What is the freezing point of water in Fahrenheit?", "Who painted the Mona Lisa?", "What is 15 plus 27?",
    "Explain what a noun is.", "What gas do humans breathe out?", "How many minutes are in an hour?",
    "What is the tallest animal?", "Suggest a name for a pet goldfish.", "What is the main ingredient of bread?",
    "Write one sentence about the moon.", "What is the capital of Italy?", "Which planet is called the red planet?",
    "What does CPU stand for?", "How do you say hello in French?", "What is a triangle with three equal sides called?",
    "List two fruits that are yellow.", "What is the largest mammal?", "How many hours are in a day?",
    "Write a Python function that adds two numbers.", "What is the plural of 'mouse'?",
    "Why do we need sleep?", "What is the speed of light, roughly?", "Give a tip for staying focused while studying.",
    "What is the capital of Germany?", "What do bees make?", "How many sides does a hexagon have?",
    "What is the past tense of 'run'?", "Name a musical instrument with strings.", "What is gravity?",
]
assert len(CHAT_PROMPTS) == 50
