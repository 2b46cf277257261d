"""Requests where the router erred on prompts by other authors (rubric rule 10): ordinary writing,
role-play and explanations wrapped in personal context (tier 2, not 3), multiple-choice questions
on school material (tier 2), plain search-engine fact questions (tier 1), and terse competition
problems that ask only for the answer (tier 4)."""

ORDINARY = [(2, t) for t in [
    # writing with personal context: the context is long, the task is still one short piece
    "My grandmother turns 90 on Saturday and the whole family is coming. Could you write a warm, funny toast "
    "I can read at dinner? She loves gardening and still beats everyone at cards.",
    "I run a tiny dog-grooming shop in a small town. Write a short flyer text announcing our new Saturday hours "
    "and a 10% discount for first visits.",
    "Our school's science fair is next week and my daughter made a volcano. Help me write a two-sentence "
    "description for her poster.",
    "I need to tell my team that the Friday meeting moves to Monday because half of us are travelling. Write "
    "a short, friendly Slack message.",
    "Can you write a thank-you note to my neighbour who watered my plants for three weeks while I was away?",
    "I'm applying for a part-time job at a bookshop. Write a short cover letter; I've volunteered at the "
    "library for two years and I love fantasy novels.",
    "Write a short speech for my brother's graduation party, nothing too sentimental, maybe a joke about how "
    "long he took to finish.",
    "Write a 200-word story about a robot who learns to bake bread, for a children's magazine.",
    "Could you write a short poem for my wife's birthday card? We met on a rainy train platform ten years ago.",
    "Write an apology email to a customer whose order arrived two weeks late, offering free shipping next time.",
    "Please write a catchy description for our café's new pumpkin soup for the menu board.",
    "Help me write a short bio for my photography website. I shoot weddings and I'm based near the coast.",
    # role-play of ordinary difficulty
    "Let's play a game: you are a grumpy wizard running a potion shop and I'm a customer who wants a love "
    "potion. Stay in character.",
    "Act as my Spanish conversation partner. We're at a market and I want to buy fruit. Start the conversation.",
    "Pretend you're a tour guide in ancient Rome and welcome a group of tourists to the Colosseum.",
    "You are a friendly customer-service agent for an internet provider. I'm calling because my wifi keeps "
    "dropping. Respond to me.",
    "Role-play a nervous first-day employee introducing themselves to the team at a morning stand-up.",
    "Be a medieval knight who just woke up in a modern supermarket. Describe what you see.",
    "Imagine you are my cat and explain why you knocked the glass off the table this morning.",
    "You're a football coach at half time and we're losing 2-0. Give the team a short pep talk.",
    # explanations of one everyday concept, asked with context
    "My son asked me why we have leap years and I didn't know what to say. Can you explain it simply?",
    "I keep hearing about interest rates on the news. What does it actually mean when the central bank raises "
    "them, and how could it affect my savings?",
    "I just got a smart thermostat. Can you explain how it saves energy compared with a normal one?",
    "My doctor said my blood pressure is 135 over 85. What do those two numbers mean?",
    "I'm new to gardening. Why do people say tomatoes need full sun, and what happens if they don't get it?",
    "Explain to a beginner how a bicycle's gears make it easier to ride uphill.",
    "Why does bread go stale, and why does putting it in the fridge make it worse?",
    "We're going on a long flight with a toddler. Why do ears hurt during landing and what helps?",
    "I'm reading about the Roman Empire. Can you explain in a few paragraphs why it split into east and west?",
    "Explain how a refrigerator keeps food cold, in plain language.",
    # multiple-choice and short school questions with a worked answer
    "Which planet has the most known moons? A) Earth B) Saturn C) Mars D) Mercury. Explain your choice.",
    "Which of these is a renewable energy source? (a) coal (b) natural gas (c) wind (d) oil — and why?",
    "Which organ produces insulin? A. liver B. pancreas C. kidney D. stomach. Give a one-line reason.",
    "In which layer of the atmosphere does most weather happen? Options: stratosphere, troposphere, "
    "mesosphere, thermosphere. Explain briefly.",
    "What is the main function of red blood cells? A) fight infection B) carry oxygen C) clot blood "
    "D) digest food. Explain the answer.",
    "Which word is a synonym of 'rapid'? slow / quick / heavy / quiet. Use it in a sentence.",
    "A rectangle is 8 cm long and 5 cm wide. What is its area and its perimeter? Show the working.",
    "If a shirt costs $40 and is 25% off, what do I pay? Explain how you got it.",
]] + [(1, t) for t in [
    # plain search-engine questions: a fact to look up, however it is phrased
    "how long do tortoises live", "what is the boiling point of water in fahrenheit", "who painted the mona lisa",
    "when did the first iphone come out", "how many bones are in the human body", "what is the smallest continent",
    "how far is the moon from earth", "who is the author of the hobbit", "what time zone is chicago in",
    "how many players on a basketball team", "what language do they speak in brazil", "symptoms of the flu",
    "how many calories in an avocado", "who invented the printing press", "what does dna stand for",
    "how many teaspoons in a tablespoon", "what is the currency of thailand", "when was the eiffel tower built",
    "tallest building in the world", "how deep is the mariana trench", "what is the national animal of scotland",
    "how many hours of sleep does a teenager need", "who won the first world cup", "meaning of the word ubiquitous",
    "what is the speed of sound", "how many weeks in a year", "what is the chemical symbol for gold",
    "where is the great barrier reef", "how old is the universe", "what year did world war 2 end",
]] + [(4, t) for t in [
    # terse competition problems: one line, the answer only, still olympiad-level reasoning behind it
    "Find the number of positive divisors of 2^10 * 3^5 that are perfect squares, and the sum of those divisors.",
    "Find the last three digits of 7^999.", "How many positive integers n < 1000 make n^2 + n + 41 composite?",
    "Find all real x with x^4 - 4x^3 + 6x^2 - 4x = 15.",
    "Find the smallest positive integer n such that n! ends in exactly 100 zeros.",
    "Find all pairs of primes (p, q) with p^2 - 2q^2 = 1.",
    "How many subsets of {1, ..., 15} contain no two consecutive integers?",
    "Find the maximum of xy + yz + zx given x + y + z = 3 and x, y, z >= 0, and where it is attained.",
    "Evaluate the sum of floor(sqrt(k)) for k = 1 to 2025.",
    "In triangle ABC, AB = 13, BC = 14, CA = 15. Find the length of the altitude from A and the inradius.",
    "Find the number of lattice points strictly inside the circle x^2 + y^2 = 50.",
    "Find all integer solutions of x^3 + y^3 = 2023.", "Compute the remainder of 2^2025 + 3^2025 modulo 13.",
    "How many 6-digit numbers have digits summing to 27?",
    "Find the minimum of (a + 1/a)^2 + (b + 1/b)^2 for positive a, b with a + b = 1.",
    "A frog starts at 0 and jumps +1 or +2 with equal probability. Find the probability it ever lands on 10.",
    "Find the largest n such that 3^n divides 100!.", "Find all n for which 2^n + 1 is divisible by n^2.",
    "How many ways can 8 rooks be placed on a chessboard so that none attack each other and none is on the "
    "main diagonal?", "Find the sum of all positive integers n for which n^2 - 19n + 99 is a perfect square.",
]]
