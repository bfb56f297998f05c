[
[('forward', 1290), ('forward', 1065), ('forward', 855), ('forward', 855), ('backward', 1065), ('backward', 1065), ('backward', 1140), ('backward', 1275)],
[('forward', 1290), ('forward', 1065), ('forward', 855), ('forward', 855), ('backward', 1065), ('backward', 1065), ('backward', 1125), ('backward', 1230)],
[('forward', 1290), ('forward', 1065), ('forward', 855), ('forward', 855), ('backward', 870), ('backward', 1065), ('backward', 1125), ('backward', 1230)],
[('forward', 1290), ('forward', 1065), ('forward', 855), ('forward', 855), ('backward', 855), ('backward', 1065), ('backward', 1125), ('backward', 1230)],
[('forward', 1290), ('forward', 1065), ('forward', 855), ('forward', 855), ('backward', 855), ('backward', 1065), ('backward', 1125), ('backward', 1170)],
[('forward', 1290), ('forward', 1065), ('forward', 855), ('backward', 1140), ('forward', 1125), ('backward', 915), ('backward', 1125), ('backward', 1140)],
[('forward', 1290), ('forward', 870), ('backward', 1275), ('forward', 1125), ('backward', 1140), ('forward', 1290), ('backward', 1125), ('backward', 1140)],
[('forward', 1275), ('backward', 1290), ('forward', 1065), ('backward', 1080), ('forward', 1065), ('backward', 1065), ('forward', 1230), ('backward', 1230)],
]
# Measured iteration time: 1.748276 s
# Measured iteration energy: 2341.8685 J
# Effective energy (above blocking): 1172.0621 J
# Iteration 234 planned time: 1739 units
# Iteration 234 total cost with P2P: 2353.17
