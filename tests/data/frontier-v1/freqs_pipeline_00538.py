[
[('forward', 1395), ('forward', 1095), ('forward', 855), ('forward', 855), ('backward', 1065), ('backward', 1200), ('backward', 1290), ('backward', 1395)],
[('forward', 1395), ('forward', 1080), ('forward', 855), ('forward', 855), ('backward', 1065), ('backward', 1140), ('backward', 1230), ('backward', 1395)],
[('forward', 1395), ('forward', 1080), ('forward', 855), ('forward', 855), ('backward', 1065), ('backward', 1140), ('backward', 1230), ('backward', 1395)],
[('forward', 1395), ('forward', 1080), ('forward', 855), ('forward', 855), ('backward', 1065), ('backward', 1140), ('backward', 1275), ('backward', 1395)],
[('forward', 1395), ('forward', 1080), ('forward', 855), ('forward', 855), ('backward', 930), ('backward', 1140), ('backward', 1275), ('backward', 1395)],
[('forward', 1395), ('forward', 1080), ('forward', 855), ('backward', 1395), ('forward', 1395), ('backward', 1140), ('backward', 1275), ('backward', 1395)],
[('forward', 1395), ('forward', 1080), ('backward', 1395), ('forward', 1395), ('backward', 1395), ('forward', 1395), ('backward', 1275), ('backward', 1395)],
[('forward', 1395), ('backward', 1395), ('forward', 1275), ('backward', 1140), ('forward', 1275), ('backward', 1140), ('forward', 1395), ('backward', 1395)],
]
# Measured iteration time: 1.617141 s
# Measured iteration energy: 2497.3247 J
# Effective energy (above blocking): 1415.2633 J
