"""Raw sources read once (GSM8K, math_cot_100, MATH-500, Big-Math), prompts, the math reward,
tasks.
"""
